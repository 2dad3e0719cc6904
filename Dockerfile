# The same steps as CI (.ci/run): install exactly what the lock file pins, type-check; the
# `test` stage runs the test suite. The final image drops the development packages and runs
# the server as its own process, so that SIGTERM reaches it (graceful shutdown).
FROM node:24-bookworm-slim AS build
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

FROM build AS runtime
RUN npm prune --omit=dev --no-audit --no-fund && mkdir -p /data && chown node:node /data
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 DATA_DIR=/data
USER node
EXPOSE 3000
VOLUME ["/data"]
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "fetch('http://127.0.0.1:'+process.env.PORT+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
CMD ["node", "src/server.ts"]
