# The same steps as CI (.ci/run): install exactly what the lock file pins, type-check; the
# `test` stage runs the test suite. The final image drops the development packages and runs
# the server as its own process, so that SIGTERM reaches it (graceful shutdown).
# BASE: the Node 24 image both stages start from (a local one where no registry is reachable).
ARG BASE=node:24-bookworm-slim
FROM ${BASE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The workspace of openapi-typescript (npm run docs): npm ci needs its manifest.
COPY scripts/typegen/package.json scripts/typegen/
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run typecheck

# docker build --target test --network host --build-arg TEST_DATABASE_URL=... --build-arg TEST_REDIS_URL=... .
FROM build AS test
ARG TEST_DATABASE_URL=""
ARG TEST_REDIS_URL=""
ENV TEST_DATABASE_URL=$TEST_DATABASE_URL TEST_REDIS_URL=$TEST_REDIS_URL
RUN npm test

# The runtime image holds what runs: the pruned packages, package.json and src/ without its
# unit tests. test/, bench/, scripts/ and docs/ stay in the build stages.
FROM build AS prod
RUN npm prune --omit=dev --no-audit --no-fund && find src -name '*.test.ts' -delete

FROM ${BASE} AS runtime
WORKDIR /app
COPY --from=prod /app/package.json ./
COPY --from=prod /app/node_modules node_modules
COPY --from=prod /app/src src
RUN mkdir -p /data && chown node:node /data
# GLIBC_TUNABLES: glibc's mmap threshold fixed, so that memory freed after a large conversion goes back to the system
# rather than stay in the threads' malloc arenas (src/launch.ts says why and what it measured).
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 DATA_DIR=/data GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072
USER node
EXPOSE 3000
VOLUME ["/data"]
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "src/server.ts"]
