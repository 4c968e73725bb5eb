#include "workloads/vidur_trace.h"

#include "workloads/csv_trace.h"

namespace servesim {

CsvColumns vidur_columns() {
  CsvColumns c;
  c.arrival = "arrived_at";
  c.prompt_tokens = "num_prefill_tokens";
  c.output_tokens = "num_decode_tokens";
  return c;
}

Result<std::vector<RequestSpec>> read_vidur_trace(const ReplayOptions& options) {
  ReplayOptions vidur = options;
  vidur.columns = vidur_columns();
  return read_csv_trace(vidur);
}

}  // namespace servesim
