"""The web page and JSON API (FastAPI). Imports only aiayn's public pieces; deletable on its own."""
