package store

import "syscall"

// populateFlag makes mmap map every page of a case file at once
// (MAP_POPULATE): one pass over the page cache when a case is first read,
// instead of a page fault per 4 KiB on the first epoch's patch reads
// (117–133 instead of 104–112 samples/s over two epochs on the benchmark
// dataset, docs/bench/data.md).
const populateFlag = syscall.MAP_POPULATE
