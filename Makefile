# Mirrors the npm scripts.
.PHONY: install start worker build test typecheck bench
install: ; npm install
start: ; npm start
worker: ; npm run worker
build: ; npm run build
test: ; npm test
typecheck: ; npm run typecheck
bench: ; npm run bench
