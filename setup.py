"""Maps the repository's folders onto importable package names (see pyproject.toml)."""

from setuptools import find_namespace_packages, find_packages, setup

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

# pedl's `determined` package (sdk/compat/determined) travels inside the wheel as files under
# pedl/_compat/, a folder the harness appends to sys.path only when no real Determined is importable
# (pedl.harness.compat), so an installed pedl runs Determined's Trial APIs as a checkout does.
COMPAT = ["determined"] + [f"determined.{sub}" for sub in find_packages("sdk/compat/determined")]
COMPAT_DIRS = {f"pedl._compat.{p}": "sdk/compat/" + p.replace(".", "/") for p in COMPAT}

# The web UI's pages, scripts and vendored chart library are served from the installed package. Their
# folders are listed as (namespace) packages of data, so setuptools ships them without a warning.
STATIC = ["pedl_webui.static"] + [
    f"pedl_webui.static.{sub}" for sub in find_namespace_packages("services/webui/static")
]
PACKAGE_DATA = {"pedl.v1": ["*.pyi"]} | {package: ["*.html", "*.js", "*.css", "*.txt"] for package in STATIC}
setup(
    packages=packages + STATIC + list(COMPAT_DIRS), package_dir=ROOTS | COMPAT_DIRS, package_data=PACKAGE_DATA
)
