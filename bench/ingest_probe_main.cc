// ingest_probe: shared-memory ingest rate a multiprocessor, by copy mechanism and carveout
// (bench/ingest_probe.cu).
#include "bench/ingest_probe.h"

int main() { return mla_tail_bench::RunIngestProbe(); }
