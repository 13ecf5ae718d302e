"""The watcher: poll stock, match waiting orders to offers, deploy, follow VMs to running."""
