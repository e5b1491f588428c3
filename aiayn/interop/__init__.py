"""Import of other toolkits' models into ordinary aiayn checkpoint directories. Optional dependencies
(transformers, huggingface_hub) are imported only inside these modules, only when an import runs."""
