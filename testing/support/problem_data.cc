#include "testing/support/problem_data.h"

#include <memory>
#include <set>
#include <vector>

namespace mla_tail_testing {
namespace {

using mla_tail::kLatentDim;
using mla_tail::kValueDim;

bool Inactive(const ProblemOptions& o, int64_t request) {
  return o.inactive_every > 1 && request % o.inactive_every == 1;
}

// The last active request (request 0 is active whatever inactive_every says).
int64_t LastActiveRequest(const ProblemOptions& o) {
  int64_t r = o.shape.rows / o.shape.q - 1;
  while (r > 0 && Inactive(o, r)) --r;
  return r;
}

constexpr uint16_t kNan = 0x7fc0, kPlusInf = 0x7f80, kMinusInf = 0xff80;

}  // namespace

std::vector<int32_t> ProblemLengths(const ProblemOptions& o) {
  std::vector<int32_t> lengths(o.shape.rows / o.shape.q);
  for (size_t r = 0; r < lengths.size(); ++r) {
    lengths[r] = Inactive(o, r) ? (o.negative_lengths ? -7 : 0) : static_cast<int32_t>(1 + r);
  }
  return lengths;
}

std::vector<int> SpecialRows(const ProblemOptions& o) {
  if (!o.special_values) return {};
  const int64_t last = LastActiveRequest(o);
  std::set<int> rows = {0, static_cast<int>(last * o.shape.q),
                        static_cast<int>(last * o.shape.q + o.shape.q - 1)};
  return {rows.begin(), rows.end()};
}

std::vector<SpecialValue> SpecialValues(const ProblemOptions& o) {
  if (!o.special_values) return {};
  const int64_t heads = o.shape.heads, width = heads * kValueDim;
  const int64_t last = LastActiveRequest(o);
  const int64_t last_row = last * o.shape.q + o.shape.q - 1;
  using S = SpecialValue;
  return {
      // A NaN in the latent of one head of an active row: that (row, head) is NaN throughout.
      {S::kLatent, last * o.shape.q, heads - 1, 100, kNan},
      // A NaN in W_UV: column 77 of head 0 is NaN in every active row.
      {S::kWeight, 0, 3, 77, kNan},
      // Infinite and NaN gates in two active rows: sigmoid 1, 0 and NaN.
      {S::kGate, 0, 5, 0, kPlusInf},
      {S::kGate, 0, 6, 0, kMinusInf},
      {S::kGate, 0, 7, 0, kNan},
      {S::kGate, last_row, width - 1, 0, kPlusInf},
      {S::kGate, last_row, width - 2, 0, kMinusInf},
      {S::kGate, last_row, width - 3, 0, kNan},
  };
}

ReferenceInputs HostReferenceInputs(const ProblemOptions& o) {
  const int64_t rows = o.shape.rows, heads = o.shape.heads, q = o.shape.q;
  const int64_t width = heads * kValueDim;
  struct Data {
    std::vector<int32_t> lengths;
    std::vector<uint16_t> latent, w_uv, gate;  // [B, H, 512], [H, 128, 512], [B, H * 128]
  };
  auto data = std::make_shared<Data>();
  data->lengths = ProblemLengths(o);
  data->latent.resize(rows * heads * kLatentDim);
  data->w_uv.resize(heads * kValueDim * kLatentDim);
  data->gate.resize(rows * width);
  for (int64_t i = 0; i < static_cast<int64_t>(data->latent.size()); ++i) {
    const bool inactive = data->lengths[i / (heads * kLatentDim) / q] <= 0;
    data->latent[i] = inactive ? 0xffff : TestValue(LatentSeed(o), i, o.data);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(data->w_uv.size()); ++i) {
    data->w_uv[i] = TestValue(WeightSeed(o), i, o.data);
  }
  for (int64_t i = 0; i < static_cast<int64_t>(data->gate.size()); ++i) {
    const bool inactive = data->lengths[i / width / q] <= 0;
    data->gate[i] = inactive ? 0xffff : TestValue(GateSeed(o), i, o.gates);
  }
  for (const SpecialValue& s : SpecialValues(o)) {
    switch (s.tensor) {
      case SpecialValue::kLatent:
        data->latent[(s.i * heads + s.j) * kLatentDim + s.k] = s.bits;
        break;
      case SpecialValue::kWeight:
        data->w_uv[(s.i * kValueDim + s.k) * kLatentDim + s.j] = s.bits;
        break;
      case SpecialValue::kGate:
        data->gate[s.i * width + s.j] = s.bits;
        break;
    }
  }
  ReferenceInputs in;
  in.heads = o.shape.heads;
  in.q = o.shape.q;
  in.lengths = [data](int request) { return data->lengths[request]; };
  in.latent = [data, heads](int t, int h, int k) {
    return data->latent[(t * heads + h) * kLatentDim + k];
  };
  in.w_uv = [data](int h, int k, int d) {
    return data->w_uv[(int64_t{h} * kValueDim + d) * kLatentDim + k];
  };
  in.gate = [data, width](int t, int c) { return data->gate[t * width + c]; };
  return in;
}

std::vector<int> SampleRows(const ProblemOptions& o, int random_rows) {
  const int rows = o.shape.rows;
  std::set<int> sample;
  if (rows <= 20) {
    for (int t = 0; t < rows; ++t) sample.insert(t);
  } else {
    for (int t :
         {0, 1, 7, 8, 15, 16, 17, 31, 32, 63, 64, rows - 17, rows - 16, rows - 2, rows - 1}) {
      if (t >= 0 && t < rows) sample.insert(t);
    }
    for (int i = 0; i < random_rows; ++i) {
      sample.insert(static_cast<int>(SplitMix64(o.seed * 131 + i) % rows));
    }
  }
  for (int t : SpecialRows(o)) sample.insert(t);
  return {sample.begin(), sample.end()};
}

}  // namespace mla_tail_testing
