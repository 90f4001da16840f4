"""inputs: what a campaign runs on: the pinned models (PyPI members, user GGUF files), the
synthetic GGUF models and their architectures, the pinned llama.cpp build. Imports core only."""
