"""Seeing inside: capture every attention map, merge subwords into words, hard alignments, and render
them as PNG grids, offline HTML, NPZ or JSON."""
