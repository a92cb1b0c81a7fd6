// Number formats of nccl-tests' output, shared by the table, -I and -M.
#pragma once

#include <cstdint>
#include <string>

// nccl-tests' getFloatStr: two decimals if they fit the width, then fewer, then an exponent.
std::string fit(double v, int width);

// nccl-tests' getMemString: "512.00 MB", "1.73 GB", "0 B" (binary units, 0-2 decimals).
std::string memory_text(int64_t bytes);
