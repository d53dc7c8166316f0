"""The Textual terminal UI. Only this package imports textual; the CLI imports `tuidag.ui.app` lazily."""
