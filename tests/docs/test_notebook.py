"""examples/learn_attention.ipynb runs from top to bottom (nbclient, the python3 kernel of this
interpreter's ipykernel) and shows its maps inline."""

import sys

import pytest

from tests.paths import REPO

NOTEBOOK = REPO / "examples" / "learn_attention.ipynb"


@pytest.mark.slow
def test_learn_attention_notebook_runs_and_shows_maps(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from jupyter_client.kernelspec import NATIVE_KERNEL_NAME, KernelSpecManager

    # ipykernel's native spec: jupyter_client starts it with this interpreter (sys.executable), so a clean venv
    # needs no installed kernel spec
    assert KernelSpecManager().get_kernel_spec(NATIVE_KERNEL_NAME).argv[0] in ("python", sys.executable)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name=NATIVE_KERNEL_NAME,
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    html = [out["data"]["text/html"] for cell in nb.cells if cell.cell_type == "code"
            for out in cell.get("outputs", []) if "text/html" in out.get("data", {})]
    assert len(html) >= 4  # the translation, multi-head, masks, cross-attention
    assert all("http://" not in h and "https://" not in h for h in html)
    trained = next(out["text"] for out in nb.cells[1].outputs if out.get("name") == "stdout" and "trained" in
                   out.get("text", ""))
    print(trained.strip())
