#!/usr/bin/env bash
# Stands in for the official `node:22-bookworm` and `node:22-bookworm-slim` images where Docker Hub
# cannot be reached (this project's machines and CI): a Debian 12 root made by debootstrap from
# Debian's mirror, with this machine's Node.js copied in where the official images keep it
# (/usr/local), the npm that the official node:22 images ship (10.9, from the npm registry: it ignores
# package.json's allowScripts, which is why the Dockerfile says ONNXRUNTIME_NODE_INSTALL=skip), the
# same `node` user (uid 1000), and, for the full image, the compilers that buildpack-deps brings
# (python3, make, g++) for native addons. Tagged by the official names, so the project's Dockerfile,
# unchanged, builds on them. Nothing runs from Docker Hub.
#
# Usage: scripts/docker-standins.sh [DOCKER]   (DOCKER: the docker client, default /usr/bin/docker)
# Skips the work when both tags already exist with this npm (CUTOUT_STANDINS_REBUILD=1 forces it).
set -euo pipefail
docker=${1:-/usr/bin/docker}
# The npm of Node 22.22.2, the official node:22 images' Node at the time of writing.
npm_version=${CUTOUT_STANDIN_NPM:-10.9.7}
mirror=${DEBIAN_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
mirror=${mirror:-http://deb.debian.org/debian}
standin_npm() { "$docker" image inspect --format '{{ index .Config.Labels "io.cutout.standin.npm" }}' "$1" 2>/dev/null || true; }
if [ "${CUTOUT_STANDINS_REBUILD:-0}" != 1 ] && [ "$(standin_npm node:22-bookworm)" = "$npm_version" ] && [ "$(standin_npm node:22-bookworm-slim)" = "$npm_version" ]; then
  echo "stand-ins: node:22-bookworm and node:22-bookworm-slim already present (npm $npm_version)"
  exit 0
fi
work=$(mktemp -d /var/tmp/cutout-standin.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
echo "stand-ins: debootstrap bookworm from $mirror"
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
# As the official images: node and npm under /usr/local, Node's headers for node-gyp, a `node` user.
# npm's own tarball carries all its dependencies (bundled), so unpacking it is the whole install.
node_bin=$(readlink -f "$(command -v node)")
node_prefix=$(dirname "$(dirname "$node_bin")")
install -D -m 0755 "$node_bin" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/lib/node_modules/npm" "$root/usr/local/include"
npm pack --silent --pack-destination "$work" "npm@$npm_version" >/dev/null
tar -xzf "$work/npm-$npm_version.tgz" -C "$root/usr/local/lib/node_modules/npm" --strip-components=1
[ -d "$node_prefix/include/node" ] && cp -a "$node_prefix/include/node" "$root/usr/local/include/node"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
chroot "$root" sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
tar -C "$root" -c . | "$docker" import --change 'CMD ["node"]' --change 'ENV NODE_VERSION=stand-in' \
  --change "LABEL io.cutout.standin.npm=$npm_version" - node:22-bookworm-slim
# The full image: the slim one plus what buildpack-deps brings for native addons.
cat >"$work/Dockerfile" <<'DOCKERFILE'
FROM node:22-bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 make g++ git && rm -rf /var/lib/apt/lists/*
DOCKERFILE
DOCKER_BUILDKIT=1 "$docker" build --network host -t node:22-bookworm "$work"
test "$("$docker" run --rm --network none node:22-bookworm npm --version)" = "$npm_version"
echo "stand-ins: tagged node:22-bookworm and node:22-bookworm-slim (npm $npm_version)"
