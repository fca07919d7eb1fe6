# One image for every container deployment. It runs the service alone (data and the master key in
# /data), or, with RT_LITEFS_DIR set (fly.toml sets it), under LiteFS as one node of a cluster:
# LiteFS mounts its FUSE directory and runs the service (litefs.yml). Either way the service itself
# runs as the unprivileged `bun` user (scripts/container-entry).
FROM flyio/litefs:0.5 AS litefs

FROM oven/bun:1.4.5-slim
# fuse3: LiteFS's mount; ca-certificates: its Consul lease over HTTPS.
RUN apt-get update -y && apt-get install -y --no-install-recommends ca-certificates fuse3 sqlite3 && rm -rf /var/lib/apt/lists/*
COPY --from=litefs /usr/local/bin/litefs /usr/local/bin/litefs
WORKDIR /app
COPY package.json bun.lock bunfig.toml tsconfig.json ./
RUN bun install --frozen-lockfile --production
COPY src ./src
COPY db ./db
COPY scripts/container-entry ./scripts/container-entry
COPY litefs.yml /etc/litefs.yml
# BUN_CONFIG_MAX_HTTP_REQUESTS: no cap of our own on concurrent upstream requests (src/gateways/concurrency.ts).
ENV HOST=0.0.0.0 PORT=8080 RT_DATA_DIR=/data BUN_CONFIG_MAX_HTTP_REQUESTS=65535
RUN mkdir -p /data && chown bun:bun /data && chmod 700 /data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["bun", "-e", "fetch(`http://127.0.0.1:${process.env.PORT || 8080}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Root only until the entry has mounted LiteFS (it needs FUSE) and made the data folder the service's.
ENTRYPOINT ["/app/scripts/container-entry"]
