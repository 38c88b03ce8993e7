#!/usr/bin/env bash
# Re-creates the seed corpus (fuzz/corpus is gitignored) from the example policies.
# Usage: fuzz/seed.sh   (from anywhere)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
examples="$here/../examples/policies"
dest="$here/corpus/policy_compile"
mkdir -p "$dest" "$here/corpus/policy_structured"
for f in "$examples"/*.yaml "$examples"/tenants/*.yaml; do
    [ -e "$f" ] || continue
    rel="${f#"$examples"/}"
    cp "$f" "$dest/seed-${rel//\//-}"
done
echo "seeded $(ls "$dest" | grep -c '^seed-') files into $dest"
