#!/usr/bin/env bash
# Stands in for the official `node:22-bookworm` and `node:22-bookworm-slim` images where Docker Hub
# cannot be reached (this project's machines and CI): a Debian 12 root made by debootstrap from
# Debian's mirror, with this machine's Node.js and npm copied in where the official images keep
# theirs (/usr/local), the same `node` user (uid 1000), and, for the full image, the compilers that
# buildpack-deps brings (python3, make, g++) for native addons. Tagged by the official names, so the
# project's Dockerfile, unchanged, builds on them. Nothing runs from Docker Hub.
#
# Usage: scripts/docker-standins.sh [DOCKER]   (DOCKER: the docker client, default /usr/bin/docker)
# Skips the work when both tags already exist (CUTOUT_STANDINS_REBUILD=1 forces it).
set -euo pipefail
docker=${1:-/usr/bin/docker}
mirror=${DEBIAN_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
mirror=${mirror:-http://deb.debian.org/debian}
if [ "${CUTOUT_STANDINS_REBUILD:-0}" != 1 ] && "$docker" image inspect node:22-bookworm node:22-bookworm-slim >/dev/null 2>&1; then
  echo "stand-ins: node:22-bookworm and node:22-bookworm-slim already present"
  exit 0
fi
work=$(mktemp -d /var/tmp/cutout-standin.XXXXXX)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
echo "stand-ins: debootstrap bookworm from $mirror"
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; exit 1; }
# As the official images: node and npm under /usr/local, Node's headers for node-gyp, a `node` user.
node_bin=$(readlink -f "$(command -v node)")
node_prefix=$(dirname "$(dirname "$node_bin")")
npm_dir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
install -D -m 0755 "$node_bin" "$root/usr/local/bin/node"
mkdir -p "$root/usr/local/lib/node_modules" "$root/usr/local/include"
cp -a "$npm_dir" "$root/usr/local/lib/node_modules/npm"
[ -d "$node_prefix/include/node" ] && cp -a "$node_prefix/include/node" "$root/usr/local/include/node"
ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
chroot "$root" sh -c 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node'
rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
tar -C "$root" -c . | "$docker" import --change 'CMD ["node"]' --change 'ENV NODE_VERSION=stand-in' - node:22-bookworm-slim
# The full image: the slim one plus what buildpack-deps brings for native addons.
cat >"$work/Dockerfile" <<'DOCKERFILE'
FROM node:22-bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 make g++ git && rm -rf /var/lib/apt/lists/*
DOCKERFILE
DOCKER_BUILDKIT=1 "$docker" build --network host -t node:22-bookworm "$work"
echo "stand-ins: tagged node:22-bookworm and node:22-bookworm-slim"
