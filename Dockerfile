# syntax=docker/dockerfile:1
# Build stage: `npm run build` exactly as a checkout builds (tsc, plus whatever the script adds,
# e.g. the web app bundle), from the context .dockerignore lets through.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts
COPY . .
# dist/web exists either way, so the runtime stage can copy it whether or not a web app is built.
RUN npm run build && mkdir -p dist/web

# Runtime stage: production dependencies and the service's compiled code only (dist/src,
# dist/workers, the web bundle; not dist/test or dist/bench: `tradegate bench` runs from a
# checkout), as a non-root user.
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    TRADEGATE_DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
COPY scripts/prune-native.sh ./scripts/
RUN npm ci --omit=dev --ignore-scripts && npm cache clean --force && sh scripts/prune-native.sh
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/workers ./dist/workers
COPY --from=build /app/dist/web ./dist/web
COPY bin ./bin
RUN node -e "import('uWebSockets.js').then(() => import('lmdb'))" \
 && mkdir -p /data && chown node:node /data && chmod 700 /data
USER node
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "bin/tradegate.js"]
CMD ["serve"]
