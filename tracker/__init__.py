"""xpu-workarounds: the machinery that decides, applies and retires XPU workarounds."""
