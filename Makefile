# `make test` and `make demo` build .venv themselves: torch==2.13.0 (the CPU wheel) first, so the
# package's `torch>=2.4` requirement is already met and pip never pulls the CUDA build.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-fast test-slow demo lint clean docs docs-check

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# ruff; the import contracts of pyproject.toml ([tool.importlinter]: the layers, no circles); ESLint
lint: $(STAMP) node_modules/.package-lock.json
	$(PY) -m ruff check aiayn tests bench
	$(VENV)/bin/lint-imports
	npx --no-install eslint aiayn/web/static

# ESLint for the page's ES modules, at the versions of the committed package-lock.json
node_modules/.package-lock.json: package-lock.json
	npm ci --no-audit --no-fund

# every test (what CI runs)
test: $(STAMP) lint
	$(PY) -m pytest -q

# the everyday tier: everything but the tests marked slow (browser, compiling, workers, training runs)
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow"

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# the documentation site (mkdocs.yml, docs/): strict, so a broken link or reference fails; nothing is fetched.
# Then the explorer with no server, the learning pages' "see it in the explorer": site/explorer/ (English) and
# site/ko/explorer/ (Korean), each with the demo (?model=demo, the first) and the coreference model
# (?model=coreference) running in the browser. The two models are trained once into runs/ and reused.
EXPLORER_MODELS := --model demo=runs/demo/average --model coreference=runs/coreference/average
docs: $(STAMP) node_modules/.package-lock.json runs/demo/average runs/coreference/average
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict -d site
	$(VENV)/bin/aiayn export-site $(EXPLORER_MODELS) --lang en --out site/explorer
	$(VENV)/bin/aiayn export-site $(EXPLORER_MODELS) --lang ko --out site/ko/explorer

# the docs' models, trained when absent (an interrupted run resumes): the demo in 2 to 3 minutes on 2 CPU
# cores, the coreference model in at most 18 (configs/coreference.yaml's time budget)
runs/demo/average: | $(STAMP)
	$(VENV)/bin/aiayn demo --out runs/demo

runs/coreference/average: | $(STAMP)
	$(VENV)/bin/aiayn train configs/coreference.yaml --out runs/coreference

# what `make test` runs of it (inside pytest): the strict build and every ```python block of docs/
docs-check: $(STAMP)
	$(PY) -m pytest -q tests/docs/test_docs.py

demo: $(STAMP)
	$(VENV)/bin/aiayn demo --out runs/demo

clean:
	rm -rf $(VENV) runs .pytest_cache site node_modules
