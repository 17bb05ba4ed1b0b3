"""Make the repository's packages importable from their sources on a machine where they are not
installed (bench/tpu_host_decode.sh: no index, nothing built): a ``.dist-info`` folder per package
in SITE (name, version, requirements and entry points read from its pyproject.toml), since core
finds its packs through entry points. The sources themselves go on PYTHONPATH.

    python3 bench/source_dist_info.py SITE
"""

from __future__ import annotations

import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("core", "plugins-lax", "plugins-jnp", "plugins-nnx", "examples", "plugins-llm")


def write(site: pathlib.Path) -> list[str]:
    made = []
    for folder in PACKAGES:
        root = ROOT / "packages" / folder
        spec = tomllib.loads((root / "pyproject.toml").read_text())
        project = spec["project"]
        version_text = (root / spec["tool"]["hatch"]["version"]["path"]).read_text()
        version = re.search(r"__version__\s*=\s*[\"']([^\"']+)", version_text).group(1)
        info = site / f"{project['name'].replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        meta = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {version}"]
        meta += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
        (info / "METADATA").write_text("\n".join(meta) + "\n")
        groups = project.get("entry-points", {})
        (info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in table.items()) + "\n"
            for group, table in groups.items()))
        made.append(info.name)
    return made


if __name__ == "__main__":
    print("dist-info:", ", ".join(write(pathlib.Path(sys.argv[1]))))
