"""The log pane: `view.LogView`, with what it does in modules of their own (rendering, following, search, titles)."""
