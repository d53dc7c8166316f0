"""The graph pane: `canvas.DagCanvas`, with what it does in modules of their own (tiles, selection, minimap)."""
