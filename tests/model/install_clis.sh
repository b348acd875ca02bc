#!/bin/sh
# Installs the agent CLIs pinned in tests/model/package.json from the npm registry into
# DEST (<build>/real-clis), unless DEST already holds exactly those versions. Exits 1,
# saying why, when they cannot be installed: the tests that drive them need them.
#   usage: tests/model/install_clis.sh DEST
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:?usage: install_clis.sh DEST}
mkdir -p "$dest"

# Each pinned package as "name version", one a line.
pins=$(node -e '
  const deps = require(process.argv[1]).dependencies;
  for (const [name, version] of Object.entries(deps)) console.log(name, version);
' "$here/package.json")

installed() {
    echo "$pins" | while read -r name version; do
        file="$dest/node_modules/$name/package.json"
        [ -f "$file" ] || { echo "missing $name"; continue; }
        have=$(node -p 'require(process.argv[1]).version' "$file")
        [ "$have" = "$version" ] || echo "$name is $have, not $version"
    done
}

if [ -z "$(installed)" ]; then
    echo "install_clis: the pinned CLIs are installed in $dest"
    exit 0
fi
cp "$here/package.json" "$dest/package.json"
cd "$dest"
if ! npm install --no-audit --no-fund --loglevel=error --no-package-lock >npm.log 2>&1; then
    echo "install_clis: npm could not install the pinned agent CLIs into $dest (is the npm registry reachable?):"
    tail -n 20 npm.log
    exit 1
fi
wrong=$(installed)
if [ -n "$wrong" ]; then
    echo "install_clis: after npm install, $dest is still not as pinned:"
    echo "$wrong"
    exit 1
fi
echo "install_clis: installed $(echo "$pins" | tr '\n' ' ')into $dest"
