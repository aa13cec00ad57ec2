.PHONY: demo test serve setup

setup:
	bash scripts/setup.sh

demo:
	bash scripts/demo.sh

test:
	bash scripts/test.sh

serve: setup
	.venv/bin/voice-agent serve
