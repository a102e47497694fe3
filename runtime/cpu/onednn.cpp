// runtime/cpu/onednn.cpp — oneDNN's convolution primitives through its C API, opened with
// dlopen (onednn.hpp).
//
// Each call describes its tensors in their plain layouts (ncw / nchw / ncdhw and the
// weight's oiw / oihw / oidhw, with a groups dim when there are groups) and lets oneDNN pick
// its own ("any") for the primitive, as PyTorch's mkldnn path does: the inputs are reordered
// into the primitive's layouts and the results back, each reorder skipped where the layouts
// agree. A channels-last call (attribute channels_last) describes its activations as nhwc /
// ndhwc and asks the primitive for those layouts too, as PyTorch does for a channels-last
// model, so they are never reordered; the weight's layout is still oneDNN's choice, reordered
// from and to the call's (ohwi where it is channels-last too). Primitives and reorders are made
// once per shape and kept (a model calls the same few shapes every step); the tensors' memory is
// attached per call. Calls are serialised: a primitive is not to be run by two threads at once.
#include "cpu/onednn.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ferry/error.hpp"
#include "ferry/kit/optional_library.hpp"

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define FERRY_HAVE_DNNL_HEADERS 1
#endif

namespace ferry::cpu::onednn {

#ifndef FERRY_HAVE_DNNL_HEADERS

std::string status() { return "oneDNN off: dnnl.h was not found when ferry was built"; }
bool run(const OpCall&, bool, bool) { return false; }
bool has_sgemm() { return false; }
bool sgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, std::int64_t,
           const float*, std::int64_t, float, float*, std::int64_t) {
  return false;
}

#else

namespace {

// The functions ferry calls, looked up by name in the library.
struct Api {
#define FERRY_DNNL_FN(name) decltype(&::name) name = nullptr;
#define FERRY_DNNL_FUNCTIONS(X)                                                                  \
  X(dnnl_version)                                                                                \
  X(dnnl_engine_create)                                                                          \
  X(dnnl_stream_create)                                                                          \
  X(dnnl_stream_wait)                                                                            \
  X(dnnl_memory_desc_init_by_tag)                                                                \
  X(dnnl_memory_desc_equal)                                                                      \
  X(dnnl_memory_desc_get_size)                                                                   \
  X(dnnl_dilated_convolution_forward_desc_init)                                                  \
      X(dnnl_dilated_convolution_backward_data_desc_init)                                        \
          X(dnnl_dilated_convolution_backward_weights_desc_init) X(dnnl_primitive_desc_create)   \
              X(dnnl_primitive_desc_query_md) X(dnnl_primitive_create) X(dnnl_primitive_execute) \
                  X(dnnl_reorder_primitive_desc_create) X(dnnl_primitive_desc_destroy)           \
                      X(dnnl_memory_create) X(dnnl_memory_set_data_handle) X(dnnl_sgemm)         \
                          X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_destroy)           \
                              X(dnnl_primitive_attr_set_scratchpad_mode)
  FERRY_DNNL_FUNCTIONS(FERRY_DNNL_FN)
#undef FERRY_DNNL_FN
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::string status;
  bool ok = false;
};

const Api& api() {
  static const Api a = [] {
    Api a;
    auto lib =
        kit::OptionalLibrary::open("oneDNN", "FERRY_ONEDNN", "libdnnl.so.2", "install libdnnl2");
#define FERRY_DNNL_BIND(name) lib.bind(a.name, #name)&&
    if (!(FERRY_DNNL_FUNCTIONS(FERRY_DNNL_BIND) true)) {
      a.status = lib.why_not();
      return a;
    }
#undef FERRY_DNNL_BIND
    if (a.dnnl_engine_create(&a.engine, dnnl_cpu, 0) != dnnl_success ||
        a.dnnl_stream_create(&a.stream, a.engine, dnnl_stream_default_flags) != dnnl_success) {
      a.status = "oneDNN off: no CPU engine";
      return a;
    }
    const dnnl_version_t* v = a.dnnl_version();
    a.status = fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
    a.ok = true;
    return a;
  }();
  return a;
}

void check(dnnl_status_t s, const char* what) {
  if (s != dnnl_success) throw Error(fmt::format("oneDNN: {} failed (status {})", what, int(s)));
}

// An f32 memory descriptor of `dims` laid out as `tag` says.
dnnl_memory_desc_t by_tag(const std::vector<std::int64_t>& dims, dnnl_format_tag_t tag) {
  dnnl_memory_desc_t md;
  dnnl_dims_t d;
  for (std::size_t i = 0; i < dims.size(); ++i) d[i] = dims[i];
  check(api().dnnl_memory_desc_init_by_tag(&md, int(dims.size()), d, dnnl_f32, tag),
        "memory_desc_init_by_tag");
  return md;
}

// A plain-layout memory descriptor of `dims` (row-major: a, ab, abc, ...).
dnnl_memory_desc_t plain(const std::vector<std::int64_t>& dims) {
  static const dnnl_format_tag_t tags[] = {dnnl_a,    dnnl_ab,    dnnl_abc,
                                           dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  return by_tag(dims, tags[dims.size() - 1]);
}

// An activation's descriptor: channels-last (nwc / nhwc / ndhwc: dims in order a, c..., b)
// or plain.
dnnl_memory_desc_t activation(const std::vector<std::int64_t>& dims, bool channels_last) {
  static const dnnl_format_tag_t tags[] = {dnnl_acb, dnnl_acdb, dnnl_acdeb};
  return channels_last ? by_tag(dims, tags[dims.size() - 3]) : plain(dims);
}

// The primitive's choice.
dnnl_memory_desc_t any(const std::vector<std::int64_t>& dims) {
  return by_tag(dims, dnnl_format_tag_any);
}

// Note [oneDNN scratchpads]
// oneDNN's default scratchpad (the library mode) is kept in thread-local storage of the thread
// that made the primitive. run() caches primitives for every thread, so a convolution set up
// on one host thread and run on another worked in a buffer that thread never had: a segfault
// inside oneDNN (ferry-conformance --threads 2 over conv2d, 2026-12-04). Every primitive here
// is made in the user mode and carries its own scratchpad, passed as DNNL_ARG_SCRATCHPAD;
// run()'s mutex keeps one execution of it at a time.
struct Scratchpad {
  std::vector<float> buffer;
  dnnl_memory_t memory = nullptr;  // null where the primitive needs none
};

// Attributes asking for the user mode (destroyed with the holder).
struct UserScratchpadAttr {
  dnnl_primitive_attr_t attr = nullptr;
  UserScratchpadAttr() {
    const Api& a = api();
    check(a.dnnl_primitive_attr_create(&attr), "primitive_attr_create");
    check(a.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user),
          "primitive_attr_set_scratchpad_mode");
  }
  ~UserScratchpadAttr() { api().dnnl_primitive_attr_destroy(attr); }
  UserScratchpadAttr(const UserScratchpadAttr&) = delete;
  UserScratchpadAttr& operator=(const UserScratchpadAttr&) = delete;
};

Scratchpad scratchpad_of(const_dnnl_primitive_desc_t pd) {
  const Api& a = api();
  Scratchpad s;
  const dnnl_memory_desc_t* md = a.dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  const std::size_t bytes = md ? a.dnnl_memory_desc_get_size(md) : 0;
  if (bytes == 0) return s;
  // At a 64-byte boundary, as oneDNN aligns its own.
  s.buffer.resize(bytes / sizeof(float) + 32);
  void* at = s.buffer.data();
  std::size_t room = s.buffer.size() * sizeof(float);
  check(a.dnnl_memory_create(&s.memory, md, a.engine, std::align(64, bytes, at, room)),
        "memory_create(scratchpad)");
  return s;
}

// One operand of a primitive: the user's plain layout, the primitive's, the reorder between
// them (null when they agree), its scratchpad, and the primitive-layout buffer it goes through.
struct Operand {
  dnnl_memory_t user = nullptr, inner = nullptr;
  dnnl_primitive_t reorder = nullptr;
  Scratchpad scratch;
  std::vector<float> buffer;
};

struct Prepared {
  dnnl_primitive_t primitive = nullptr;
  Scratchpad scratch;
  std::vector<std::pair<int, Operand>> operands;  // by DNNL_ARG_*
  std::vector<bool> is_output;
};

// Runs a primitive with its arguments and its scratchpad.
void execute(dnnl_primitive_t primitive, const Scratchpad& scratch,
             std::vector<dnnl_exec_arg_t> args, const char* what) {
  const Api& a = api();
  if (scratch.memory) args.push_back({DNNL_ARG_SCRATCHPAD, scratch.memory});
  check(a.dnnl_primitive_execute(primitive, a.stream, int(args.size()), args.data()), what);
}

// Makes `op` for a tensor in the layout `user_md` and the primitive's layout `inner_md`;
// `output`: the reorder runs primitive -> user.
Operand make_operand(const dnnl_memory_desc_t& user_md, const dnnl_memory_desc_t* inner_md,
                     bool output) {
  const Api& a = api();
  Operand o;
  check(a.dnnl_memory_create(&o.user, &user_md, a.engine, DNNL_MEMORY_NONE), "memory_create");
  if (a.dnnl_memory_desc_equal(&user_md, inner_md)) return o;
  o.buffer.resize(a.dnnl_memory_desc_get_size(inner_md) / sizeof(float) + 16);
  check(a.dnnl_memory_create(&o.inner, inner_md, a.engine, o.buffer.data()), "memory_create");
  dnnl_primitive_desc_t pd = nullptr;
  const UserScratchpadAttr user;
  check(output ? a.dnnl_reorder_primitive_desc_create(&pd, inner_md, a.engine, &user_md, a.engine,
                                                      user.attr)
               : a.dnnl_reorder_primitive_desc_create(&pd, &user_md, a.engine, inner_md, a.engine,
                                                      user.attr),
        "reorder_primitive_desc_create");
  o.scratch = scratchpad_of(pd);
  check(a.dnnl_primitive_create(&o.reorder, pd), "primitive_create(reorder)");
  a.dnnl_primitive_desc_destroy(pd);
  return o;
}

struct Shapes {
  std::vector<std::int64_t> x, w, y, stride, dil, lo, hi;
  std::int64_t groups;
  bool bias;
  bool channels_last;         // x and y (or their gradients) are channels-last
  bool weight_channels_last;  // the weight (or its gradient) is
};

// The weight's dims as oneDNN wants them: [G, OC/G, C/G, *k] with groups.
std::vector<std::int64_t> weight_dims(const Shapes& s) {
  if (s.groups == 1) return s.w;
  std::vector<std::int64_t> d{s.groups, s.w[0] / s.groups};
  d.insert(d.end(), s.w.begin() + 1, s.w.end());
  return d;
}

// The weight as the call holds it: plain, or channels-last ([OC, *k, C/G] in memory: ohwi,
// or gohwi with groups).
dnnl_memory_desc_t user_weight(const Shapes& s) {
  const std::vector<std::int64_t> dims = weight_dims(s);
  if (!s.weight_channels_last) return plain(dims);
  const std::size_t k = s.w.size() - 3;  // spatial dims - 1
  static const dnnl_format_tag_t tags[] = {dnnl_acb, dnnl_acdb, dnnl_acdeb};
  static const dnnl_format_tag_t grouped_tags[] = {dnnl_abdc, dnnl_abdec, dnnl_abdefc};
  return by_tag(dims, s.groups != 1 ? grouped_tags[k] : tags[k]);
}

void init_desc(OpId op, const Shapes& s, dnnl_convolution_desc_t* desc, bool fwd_hint) {
  const Api& a = api();
  const dnnl_memory_desc_t x = s.channels_last ? activation(s.x, true) : any(s.x),
                           y = s.channels_last ? activation(s.y, true) : any(s.y),
                           w = any(weight_dims(s));
  const dnnl_memory_desc_t b = plain({s.y[1]});
  dnnl_dims_t stride, dil, lo, hi;
  for (std::size_t i = 0; i < s.stride.size(); ++i)
    stride[i] = s.stride[i], dil[i] = s.dil[i] - 1, lo[i] = s.lo[i], hi[i] = s.hi[i];
  if (fwd_hint || (op != OpId::conv_backward_input && op != OpId::conv_backward_weight)) {
    // forward_training for every forward, as libtorch asks: with forward_inference oneDNN 2.6
    // picks its brgconv kernels in NHWC on AVX-512, and the NCHW <-> NHWC transposes around
    // them cost more than they save (ResNet-18's layer3 3x3 forward, batch 32, went from 0.87
    // to 1.06 of libtorch in ferry-bench, 2026-11-27); the blocked nChw16c kernels it picks
    // for training are also the ones the backward primitives are hinted with.
    check(a.dnnl_dilated_convolution_forward_desc_init(
              desc, dnnl_forward_training, dnnl_convolution_direct, &x, &w, s.bias ? &b : nullptr,
              &y, stride, dil, lo, hi),
          "convolution_forward_desc_init");
  } else if (op == OpId::conv_backward_input) {
    check(a.dnnl_dilated_convolution_backward_data_desc_init(desc, dnnl_convolution_direct, &x, &w,
                                                             &y, stride, dil, lo, hi),
          "convolution_backward_data_desc_init");
  } else {
    check(
        a.dnnl_dilated_convolution_backward_weights_desc_init(
            desc, dnnl_convolution_direct, &x, &w, s.bias ? &b : nullptr, &y, stride, dil, lo, hi),
        "convolution_backward_weights_desc_init");
  }
}

// The primitive for `op` on these shapes, or null where oneDNN has no implementation.
std::unique_ptr<Prepared> prepare(OpId op, const Shapes& s) {
  const Api& a = api();
  dnnl_convolution_desc_t desc;
  init_desc(op, s, &desc, false);
  dnnl_primitive_desc_t hint = nullptr, pd = nullptr;
  const bool backward = op == OpId::conv_backward_input || op == OpId::conv_backward_weight;
  if (backward) {
    dnnl_convolution_desc_t fwd;
    init_desc(op, s, &fwd, true);
    if (a.dnnl_primitive_desc_create(&hint, &fwd, nullptr, a.engine, nullptr) != dnnl_success)
      return nullptr;
  }
  const UserScratchpadAttr user;
  const dnnl_status_t st = a.dnnl_primitive_desc_create(&pd, &desc, user.attr, a.engine, hint);
  if (hint) a.dnnl_primitive_desc_destroy(hint);
  if (st != dnnl_success) return nullptr;
  auto p = std::make_unique<Prepared>();
  auto md = [&](dnnl_query_t q) { return a.dnnl_primitive_desc_query_md(pd, q, 0); };
  auto act = [&](const std::vector<std::int64_t>& dims) {
    return activation(dims, s.channels_last);
  };
  if (op == OpId::conv_backward_input) {
    p->operands.emplace_back(DNNL_ARG_DIFF_DST,
                             make_operand(act(s.y), md(dnnl_query_diff_dst_md), false));
    p->operands.emplace_back(DNNL_ARG_WEIGHTS,
                             make_operand(user_weight(s), md(dnnl_query_weights_md), false));
    p->operands.emplace_back(DNNL_ARG_DIFF_SRC,
                             make_operand(act(s.x), md(dnnl_query_diff_src_md), true));
    p->is_output = {false, false, true};
  } else if (op == OpId::conv_backward_weight) {
    p->operands.emplace_back(DNNL_ARG_SRC, make_operand(act(s.x), md(dnnl_query_src_md), false));
    p->operands.emplace_back(DNNL_ARG_DIFF_DST,
                             make_operand(act(s.y), md(dnnl_query_diff_dst_md), false));
    p->operands.emplace_back(DNNL_ARG_DIFF_WEIGHTS,
                             make_operand(user_weight(s), md(dnnl_query_diff_weights_md), true));
    p->is_output = {false, false, true};
    if (s.bias) {
      p->operands.emplace_back(
          DNNL_ARG_DIFF_BIAS,
          make_operand(plain({s.y[1]}),
                       a.dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 1), true));
      p->is_output.push_back(true);
    }
  } else {
    p->operands.emplace_back(DNNL_ARG_SRC, make_operand(act(s.x), md(dnnl_query_src_md), false));
    p->operands.emplace_back(DNNL_ARG_WEIGHTS,
                             make_operand(user_weight(s), md(dnnl_query_weights_md), false));
    p->is_output = {false, false};
    if (s.bias) {
      const dnnl_memory_desc_t b = plain({s.y[1]});
      p->operands.emplace_back(DNNL_ARG_BIAS, make_operand(plain({s.y[1]}), &b, false));
      p->is_output.push_back(false);
    }
    p->operands.emplace_back(DNNL_ARG_DST, make_operand(act(s.y), md(dnnl_query_dst_md), true));
    p->is_output.push_back(true);
  }
  p->scratch = scratchpad_of(pd);
  check(a.dnnl_primitive_create(&p->primitive, pd), "primitive_create");
  a.dnnl_primitive_desc_destroy(pd);
  return p;
}

}  // namespace

std::string status() { return api().status; }

bool has_sgemm() { return api().ok; }

bool sgemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* a,
           std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc) {
  const Api& api_ = api();
  if (!api_.ok) return false;
  // A refusal (arguments it does not take) leaves C as it was, for OpenBLAS to compute.
  return api_.dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, a, lda, b, ldb, beta, c,
                         ldc) == dnnl_success;
}

bool run(const OpCall& c, bool channels_last, bool weight_channels_last) {
  const Api& a = api();
  if (!a.ok) return false;
  const bool bwd_in = c.op == OpId::conv_backward_input, bwd_w = c.op == OpId::conv_backward_weight;
  // x, w and y as the call holds them (backward_input: gy, w -> gx; backward_weight: x, gy ->
  // gw and gb).
  const TensorArg& x = bwd_in ? c.outputs.at(0) : c.inputs.at(0);
  const TensorArg& w = bwd_w ? c.outputs.at(0) : c.inputs.at(1);
  const TensorArg& y = bwd_in ? c.inputs.at(0) : bwd_w ? c.inputs.at(1) : c.outputs.at(0);
  Shapes s{x.sizes,
           w.sizes,
           y.sizes,
           c.attrs.ints("stride"),
           c.attrs.ints("dilation"),
           c.attrs.ints("padding_lo"),
           {},
           c.attrs.i("groups"),
           !bwd_in && c.attrs.b("has_bias"),
           channels_last,
           weight_channels_last};
  // The right padding the output implies. oneDNN rounds the output's size down as PyTorch does,
  // so where the last window ends before the input does (a 1x1 stride-2 convolution of an even
  // size leaves the last row out), a padding of 0 gives the same output; windows that end
  // further in are not oneDNN's shape.
  for (std::size_t i = 0; i < s.stride.size(); ++i) {
    const std::int64_t hi =
        (s.y[i + 2] - 1) * s.stride[i] + s.dil[i] * (s.w[i + 2] - 1) + 1 - s.x[i + 2] - s.lo[i];
    if (hi + s.stride[i] - 1 < 0) return false;
    s.hi.push_back(std::max<std::int64_t>(hi, 0));
  }
  const std::string key = fmt::format(
      "{} {} {} {} {} {} {} {} {} {} {} {}", int(c.op), fmt::join(s.x, ","), fmt::join(s.w, ","),
      fmt::join(s.y, ","), fmt::join(s.stride, ","), fmt::join(s.dil, ","), fmt::join(s.lo, ","),
      fmt::join(s.hi, ","), s.groups, s.bias, s.channels_last, s.weight_channels_last);
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Prepared>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it == cache.end()) {
    // A case oneDNN cannot set up is remembered as such and left to ferry's own kernels.
    std::unique_ptr<Prepared> made;
    try {
      made = prepare(c.op, s);
    } catch (const Error&) {
      made = nullptr;
    }
    it = cache.emplace(key, std::move(made)).first;
  }
  Prepared* p = it->second.get();
  if (!p) return false;
  // The call's tensors, in the order prepare() listed them.
  std::vector<const TensorArg*> tensors;
  if (bwd_in) {
    tensors = {&c.inputs.at(0), &c.inputs.at(1), &c.outputs.at(0)};
  } else if (bwd_w) {
    tensors = {&c.inputs.at(0), &c.inputs.at(1), &c.outputs.at(0)};
    if (s.bias) tensors.push_back(&c.outputs.at(1));
  } else {
    tensors = {&c.inputs.at(0), &c.inputs.at(1)};
    if (s.bias) tensors.push_back(&c.inputs.at(2));
    tensors.push_back(&c.outputs.at(0));
  }
  std::vector<dnnl_exec_arg_t> args;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Operand& o = p->operands[i].second;
    check(a.dnnl_memory_set_data_handle(o.user, tensors[i]->data<float>()), "set_data_handle");
    if (o.reorder && !p->is_output[i])
      execute(o.reorder, o.scratch, {{DNNL_ARG_FROM, o.user}, {DNNL_ARG_TO, o.inner}}, "reorder");
    args.push_back({p->operands[i].first, o.inner ? o.inner : o.user});
  }
  execute(p->primitive, p->scratch, args, "convolution");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Operand& o = p->operands[i].second;
    if (o.reorder && p->is_output[i])
      execute(o.reorder, o.scratch, {{DNNL_ARG_FROM, o.inner}, {DNNL_ARG_TO, o.user}}, "reorder");
  }
  check(a.dnnl_stream_wait(a.stream), "stream_wait");
  return true;
}

#endif  // FERRY_HAVE_DNNL_HEADERS

}  // namespace ferry::cpu::onednn
