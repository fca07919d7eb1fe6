# Runs the service with Bun from the official image; data and the master key live in /data.
FROM oven/bun:1.4.5-slim
WORKDIR /app
COPY package.json bun.lock bunfig.toml tsconfig.json ./
RUN bun install --frozen-lockfile --production
COPY src ./src
COPY db ./db
# BUN_CONFIG_MAX_HTTP_REQUESTS: no cap of our own on concurrent upstream requests (src/gateways/concurrency.ts).
ENV HOST=0.0.0.0 PORT=8080 RT_DATA_DIR=/data BUN_CONFIG_MAX_HTTP_REQUESTS=65535
RUN mkdir -p /data && chown bun:bun /data && chmod 700 /data
VOLUME /data
EXPOSE 8080
USER bun
CMD ["bun", "run", "src/main.ts"]
