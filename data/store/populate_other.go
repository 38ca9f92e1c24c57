//go:build unix && !linux

package store

// populateFlag is 0 where mmap has no MAP_POPULATE: pages fault in on
// first use.
const populateFlag = 0
