"""aiayn and other toolkits: Hugging Face Marian models in and out of ordinary aiayn checkpoint directories,
and a Transformer written for CTranslate2 (the ct2 engine's model). Optional dependencies (transformers,
huggingface_hub, ctranslate2) are imported only inside these modules, only when they run."""
