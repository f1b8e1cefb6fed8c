"""Maps the repository's folders onto importable package names (see pyproject.toml)."""

from setuptools import find_packages, setup

ROOTS = {
    "pedl": "sdk/pedl",
    "pedl_scheduler": "services/scheduler",
    "pedl_agent": "services/agent",
    "pedl_checkpoint_store": "services/checkpoint_store",
    "pedl_webui": "services/webui",
    # Server-only authentication and authorisation (scheduler, checkpoint store); never in `pedl`.
    "pedl_server_auth": "services/server_auth",
}

packages: list[str] = []
for name, path in ROOTS.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(path)]

# The web UI's pages, scripts and vendored chart library are served from the installed package.
PACKAGE_DATA = {"pedl.v1": ["*.pyi"], "pedl_webui": ["static/*", "static/vendor/*"]}
setup(packages=packages, package_dir=ROOTS, package_data=PACKAGE_DATA)
