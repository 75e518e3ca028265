"""One module per XPU workaround; each is described in workarounds.toml."""
