#pragma once
// Machine-readable results: JSON (configuration + one record per op and size) and CSV (one line
// per op and size). Written by rank 0 at the end of the run.

#include <string>
#include <vector>

#include "bench/report.h"

namespace ringlet::bench {

// Throws IoError naming the path when the file cannot be written.
void writeJson(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);
void writeCsv(const std::string& path, const RunInfo& info, const std::vector<Row>& rows);

}  // namespace ringlet::bench
