"""Developer tools around the pass (emulation under qemu-hexagon, ...). The pass never imports this package."""
