//go:build skewnext

package store

import "github.com/edgequorum/edgequorum/skew"

// TypeNextReportBatch stands in, in the test build of the next release (tag
// skewnext), for a command type that release introduces: a report batch
// under a new type number, which a reader of this release does not know.
const TypeNextReportBatch CommandType = 250

func init() {
	typeLevels[TypeNextReportBatch] = skew.Level2 + 1
	reportTypes = append([]CommandType{TypeNextReportBatch}, reportTypes...)
}
