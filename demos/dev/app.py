"""The application of demos/dev.yaml: edit it while `tuidag run demos/dev.yaml --watch` runs."""


def greet(name: str) -> str:
    return f"hello, {name}"
