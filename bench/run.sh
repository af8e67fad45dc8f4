#!/usr/bin/env bash
# `make bench`: outprint against its peers on the shared corpus, in one run.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/outprint}
corpus=../shared/corpus
if [ ! -d "$corpus" ]; then
  echo "bench: ../shared/corpus is missing; using examples/" >&2
  docs=(examples/showcase.md)
else
  docs=("$corpus/memo.md" "$corpus/handbook.md" "$corpus/tables.md")
fi
echo "== one-shot render: outprint render vs pandoc --pdf-engine=xelatex (median of 5)"
go run ./bench/compare -bin "$bin" -runs 5 "${docs[@]}"
echo
echo "== warm pool (issue 3): outprint warm vs cold vs engine floor vs pandoc, median of 5;"
echo "   then a saturation run with memo.md from as many clients as the pool has processes"
pooldocs=("${docs[@]}")
[ -d "$corpus" ] && pooldocs+=(bench/docs/report-90.md)
go run ./bench/pool -runs 5 -saturate 20s "${pooldocs[@]}"
echo
echo "== memory (bench/memory, issue 23): PSS of outprint serve and its TeX processes: ready, after the README's"
echo "   examples (A4, letter, a form), idle once unused profiles retired (pool.idleTimeout 20s here, 5m by default),"
echo "   and the peak of a worker in 1 GiB with every profile in use; targets: idle < 300 MiB, peak < 80 % of 1 GiB"
go run ./bench/memory -bin "$bin"
echo
echo "== Markdown -> LaTeX conversion speed (go test -bench)"
go test ./internal/markdown -run '^$' -bench BenchmarkLaTeX -benchtime 2s
echo
echo "== Outline collection (issue 11): 30 documents as one PDF vs one by one (GET /render) through the"
echo "   same warm pool; target ratio <= 3 (metric 'ratio')"
go test ./internal/httpapi -run '^$' -bench BenchmarkOutlineCollection -benchtime 3x
echo
echo "== service under load: outprint serve saturated on loopback (bench/load, 20 s)"
echo "   /healthz and 429 refusals must stay fast (p99 < 10 ms) while every slot renders"
mkdir -p bench/out
go run ./bench/load -bin "$bin" -duration 20s -log bench/out/serve-load.log
echo
echo "== durable jobs (bench/jobs): acceptance throughput on SQLite and PostgreSQL, queue delay / run split"
echo "   targets: >= 300 jobs/s on SQLite, >= 1,000 jobs/s on PostgreSQL (127.0.0.1:5432), gateway < 300 MiB"
go run ./bench/jobs -jobs 2000 -render 20
echo
echo "== forms (bench/forms): fill and flatten a two-page form, outprint (warm pool) vs pdftk-java fill_form flatten"
echo "   same form and values (every text field, five scripts), same run; target >= 3x pdftk's fills/s"
echo "   then 1,000 fills as durable jobs (SQLite), all must succeed"
go run ./bench/forms -n 60 -jobs 1000
echo
echo "== diagrams (bench/diagram, issue 27): Mermaid and Graphviz through the warm browser pool, cold and warm,"
echo "   the cost three Mermaid diagrams add to a render (target <= 0.3 s warm) and diagrams/s saturated"
go run ./bench/diagram -runs 9 -saturate 20s
echo
echo "== Office documents (bench/office, issue 28): a one-page DOCX through the warm LibreOffice pool vs"
echo "   soffice --headless --convert-to pdf per document; targets: warm <= 0.4x naive, 4 at once on 2 slots"
echo "   >= 1.7x the throughput of one at a time; then 100 conversions as jobs against outprint serve, all must succeed"
if [ -f ../shared/office/word-google-docs.docx ]; then
  go run ./bench/office -runs 9 -bin "$bin" -jobs 100 ../shared/office/word-google-docs.docx
else
  echo "bench: ../shared/office is missing; pass a one-page DOCX to go run ./bench/office -bin $bin FILE.docx" >&2
fi
echo
echo "== hostile inputs (bench/hostile): every finding of issues 10, 24 and 29 against outprint serve, OUTPRINT_TIMEOUT=20s"
echo "   targets: nothing busy past ~21 s, server RSS < 600 MiB, /healthz p99 < 50 ms, the bystander <= 2x"
go run ./bench/hostile -bin "$bin"
echo
echo "== cluster (bench/cluster): gateway and workers as processes on PostgreSQL (127.0.0.1:5432) and SeaweedFS S3"
echo "   targets: sync memo via gateway -> worker <= 1.15x serve + 15 ms (median of 20, same run);"
echo "   10,000 queued jobs: gateway < 300 MiB RSS, each worker < 150 MiB; two workers pinned to a core each >= 1.8x one"
go run ./bench/cluster -bin "$bin"
