PY := .venv/bin/python
export HF_HUB_OFFLINE := 1
export GRADIO_ANALYTICS_ENABLED := False

.PHONY: setup run test test-fast test-cuda
setup: .venv/.setup-done
.venv/.setup-done: requirements.txt scripts/setup.sh
	bash scripts/setup.sh

run: setup          ## the explorer on the embedded default, http://127.0.0.1:7860
	$(PY) app.py

test: setup         ## the CPU test suite: everything (embedded model, Chromium, Ray); CI runs this
	$(PY) -m pytest -q

test-fast: setup    ## the fast tier (< 2 min on 2 cores, one worker a core): tiny pairs, pure functions, UI wiring, no browser
	$(PY) -m pytest -q -m "not slow and not cuda" -n auto

test-cuda: setup    ## GPU checks (skipped without CUDA)
	$(PY) -m pytest -q -m cuda
