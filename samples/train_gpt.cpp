// ferry-gpt — trains a character-level GPT (samples/gpt.hpp: nanoGPT's pre-norm blocks, causal
// scaled_dot_product_attention, tied embeddings) on Shakespeare (data/shakespeare, public
// domain) with AdamW, a cosine learning rate after a linear warmup and gradient clipping;
// moves the run to every other available device and back with migrate() mid-training, the
// loss curve going on where it was; prints the curve, saves a checkpoint and samples from it.
// --generate samples text from a saved checkpoint, one KV-cached step per character.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gpt.hpp"
#include "sample_common.hpp"

#ifndef FERRY_SHAKESPEARE_PATH
#define FERRY_SHAKESPEARE_PATH "data/shakespeare/shakespeare.txt"
#endif

namespace {

using ferry::Device;
using ferry::DType;
using ferry::Tensor;
using json = nlohmann::json;

double real_option(const sample::Args& args, const std::string& name, double fallback) {
  if (!args.has(name)) return fallback;
  char* end = nullptr;
  const std::string s = args.get(name, "");
  const double v = std::strtod(s.c_str(), &end);
  if (!end || *end || !(v >= 0)) args.fail("--" + name + " needs a number >= 0");
  return v;
}

// The characters of the text, sorted: token i is vocab[i].
struct Vocab {
  std::string chars;
  std::map<char, std::int64_t> index;
  explicit Vocab(std::string c) : chars(std::move(c)) {
    for (std::size_t i = 0; i < chars.size(); ++i) index[chars[i]] = std::int64_t(i);
  }
  std::vector<std::int64_t> encode(const std::string& s) const {
    std::vector<std::int64_t> out;
    for (char ch : s) {
      auto it = index.find(ch);
      if (it == index.end())
        throw ferry::ValueError(std::string("the prompt has a character the model never saw: '") +
                                ch + "'");
      out.push_back(it->second);
    }
    return out;
  }
};

// Random windows of `block` tokens and the tokens one further on.
std::pair<Tensor, Tensor> batch(const Tensor& data, std::int64_t b, std::int64_t block,
                                const Device& dev) {
  const Tensor start = ferry::randint(0, data.size(0) - block - 1, {b, 1});
  const Tensor idx = start + ferry::arange(double(block), {.dtype = DType::i64}).unsqueeze(0);
  const Tensor x = ferry::index_select(data, 0, idx.reshape({-1})).reshape({b, block});
  const Tensor y = ferry::index_select(data, 0, (idx + 1).reshape({-1})).reshape({b, block});
  return {x.to(dev), y.to(dev)};
}

// nanoGPT's schedule: linear warmup to lr, then a cosine down to lr / 10.
double lr_at(std::int64_t step, std::int64_t warmup, std::int64_t total, double lr) {
  if (step < warmup) return lr * double(step + 1) / double(warmup);
  const double t = double(step - warmup) / double(std::max<std::int64_t>(1, total - warmup));
  return lr / 10 + 0.5 * (1 + std::cos(M_PI * std::min(1.0, t))) * (lr - lr / 10);
}

// Samples `n` characters after `prompt`: temperature, top-k, and the KV cache, so each new
// character runs the model over one position. When the context fills the model's block, the
// cache restarts from the last half block.
std::string generate(sample::Gpt& model, const Vocab& vocab, const std::string& prompt,
                     std::int64_t n, double temperature, std::int64_t top_k, const Device& dev) {
  ferry::NoGradGuard no_grad;
  model.eval();
  std::vector<std::int64_t> tokens = vocab.encode(prompt.empty() ? "\n" : prompt);
  const std::int64_t block = model.config.block_size;
  sample::KvCache cache;
  auto prefill = [&] {
    cache.clear();
    const std::size_t keep = std::min<std::size_t>(tokens.size(), std::size_t(block / 2));
    std::vector<std::int64_t> ctx(tokens.end() - std::ptrdiff_t(keep), tokens.end());
    const Tensor t = ferry::tensor(ctx).reshape({1, -1}).to(dev);
    return model.forward(t, &cache).select(1, -1).reshape({-1});
  };
  Tensor logits = prefill();
  std::string out;
  for (std::int64_t i = 0; i < n; ++i) {
    Tensor l = logits.to(DType::f32) / std::max(temperature, 1e-6);
    if (top_k > 0 && top_k < l.size(0)) {
      const Tensor kth = ferry::topk(l, top_k).values.select(0, top_k - 1);
      l = ferry::masked_fill(l, ferry::lt(l, kth), -INFINITY);
    }
    const std::int64_t next =
        ferry::multinomial(ferry::softmax(l, 0), 1).cpu().item<std::int64_t>();
    tokens.push_back(next);
    out += vocab.chars[std::size_t(next)];
    if (cache.length() >= block) {
      logits = prefill();
    } else {
      const Tensor t = ferry::full({1, 1}, next, {.dtype = DType::i64, .device = dev});
      logits = model.forward(t, &cache).reshape({-1});
    }
  }
  model.train();
  return out;
}

// The loss curve as rows of text: one column per evaluation, a '*' in the row of its
// validation loss.
void print_curve(const std::vector<std::pair<std::int64_t, double>>& points) {
  if (points.size() < 2) return;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [s, l] : points)
    if (std::isfinite(l)) lo = std::min(lo, l), hi = std::max(hi, l);
  if (!(lo <= hi)) return;  // no finite loss to draw
  const int rows = 10;
  const double span = std::max(hi - lo, 1e-9);
  std::vector<std::string> grid(rows, std::string(points.size(), ' '));
  for (std::size_t i = 0; i < points.size(); ++i)
    if (std::isfinite(points[i].second))
      grid[std::size_t(std::min(rows - 1, int((hi - points[i].second) / span * rows)))][i] = '*';
  std::printf("\nvalidation loss by step:\n");
  for (int r = 0; r < rows; ++r)
    std::printf("  %6.3f |%s\n", hi - span * r / rows, grid[std::size_t(r)].c_str());
  std::printf("         +%s\n          step 0 .. %lld\n", std::string(points.size(), '-').c_str(),
              (long long)points.back().first);
}

}  // namespace

int main(int argc, char** argv) {
  sample::Args args(
      argc, argv,
      "usage: ferry-gpt [--device DEV] [--steps N] [--small] [--amp] [--save PATH]\n"
      "                [--profile PATH]\n"
      "       ferry-gpt --generate [--load PATH] [--tokens N] [--prompt TEXT]\n\n"
      "Trains a character-level GPT on Shakespeare with AdamW (cosine schedule, warmup,\n"
      "gradient clipping), moving the run between every available device mid-training, prints\n"
      "the loss curve, saves a checkpoint and samples text from it. Exits 0 when the final\n"
      "validation loss reaches --goal (1.75; 2.6 with --small). --generate samples from a\n"
      "checkpoint instead, with a KV cache.",
      {{"device", "where training starts and ends (default: ferry::default_device())"},
       {"steps", "optimizer steps (default 1500; 200 with --small)"},
       {"away", "steps on each other device, from the middle step on (default 50; 8 with --small)"},
       {"batch", "sequences per step (default 16)"},
       {"block", "context length (default 128; 64 with --small)"},
       {"layers", "transformer blocks (default 4; 2 with --small)"},
       {"embd", "embedding width (default 128; 64 with --small)"},
       {"heads", "attention heads (default 4)"},
       {"lr", "peak learning rate (default 0.003)"},
       {"data", "the text (default: the repository's data/shakespeare/shakespeare.txt)"},
       {"save", "checkpoint written after training (default gpt.safetensors)"},
       {"load", "checkpoint --generate reads (default gpt.safetensors)"},
       {"tokens", "characters to generate (default 400)"},
       {"prompt", "text the generation continues (default a newline)"},
       {"temperature", "sampling temperature (default 0.8)"},
       {"top-k", "sample among the k likeliest characters (default 20)"},
       {"seed", "random seed (default 1337)"},
       {"goal", "validation loss the run must reach to exit 0 (default 1.75; 2.6 with --small)"},
       {"amp!", "mixed precision: autocast (f16; bf16 on the CPU) and, for f16, GradScaler"},
       {"no-migrate!", "train on --device only"},
       {"generate!", "sample from --load instead of training"},
       {"small!", "a quick run: 2 layers, width 64, context 64, 200 steps"},
       {sample::Profiling::kOption, sample::Profiling::kHelp}});
  try {
    sample::Profiling profiling(args);
    const bool small = args.has("small");
    const Device home = args.device();
    ferry::manual_seed(args.number("seed", 1337));
    const double temperature = real_option(args, "temperature", 0.8);
    const std::int64_t top_k = args.number("top-k", 20);

    if (args.has("generate")) {
      const std::string path = args.get("load", "gpt.safetensors");
      const ferry::StateDict sd = ferry::load_safetensors(path, home);
      if (!sd.metadata.count("gpt_config") || !sd.metadata.count("vocab"))
        throw ferry::Error(path + " is not a ferry-gpt checkpoint (no gpt_config or vocab)");
      const json c = json::parse(sd.metadata.at("gpt_config"));
      const Vocab vocab(json::parse(sd.metadata.at("vocab")).get<std::string>());
      sample::Gpt model({.vocab_size = c["vocab_size"],
                         .block_size = c["block_size"],
                         .n_layer = c["n_layer"],
                         .n_head = c["n_head"],
                         .n_embd = c["n_embd"]},
                        {.device = home});
      model.load_state_dict(sd);
      const std::string prompt = args.get("prompt", "\n");
      std::printf(
          "%s%s\n", prompt.c_str(),
          generate(model, vocab, prompt, args.number("tokens", 400), temperature, top_k, home)
              .c_str());
      return 0;
    }

    const std::string text = [&] {
      const std::string path = args.get("data", FERRY_SHAKESPEARE_PATH);
      std::FILE* f = std::fopen(path.c_str(), "rb");
      if (!f) throw ferry::Error("cannot open " + path + " (--data names the text)");
      std::string s;
      char buf[65536];
      for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
      std::fclose(f);
      return s;
    }();
    std::string chars;
    for (unsigned char ch : text)
      if (chars.find(char(ch)) == std::string::npos) chars += char(ch);
    std::sort(chars.begin(), chars.end());
    const Vocab vocab(chars);
    const Tensor all = ferry::tensor(vocab.encode(text));
    const std::int64_t n_train = all.size(0) * 9 / 10;
    const Tensor train = all.slice(0, 0, n_train), val = all.slice(0, n_train, all.size(0));

    const sample::GptConfig config{.vocab_size = std::int64_t(chars.size()),
                                   .block_size = args.number("block", small ? 64 : 128),
                                   .n_layer = args.number("layers", small ? 2 : 4),
                                   .n_head = args.number("heads", 4),
                                   .n_embd = args.number("embd", small ? 64 : 128)};
    const std::int64_t steps = args.number("steps", small ? 200 : 1500);
    const std::int64_t away = args.number("away", small ? 8 : 50);
    const std::int64_t b = args.number("batch", 16), warmup = std::max<std::int64_t>(1, steps / 15);
    const std::int64_t eval_every = std::max<std::int64_t>(1, steps / 20), eval_batches = 4;
    const double lr = real_option(args, "lr", 3e-3);
    sample::Gpt model(config, {.device = home});
    // AdamW with weight decay on the matrices only (nanoGPT's groups).
    std::vector<Tensor> decay, no_decay;
    for (const auto& [name, p] : model.named_parameters())
      (p.dim() >= 2 ? decay : no_decay).push_back(p);
    ferry::optim::AdamW opt(std::vector<ferry::optim::AdamW::Group>{
        {decay, ferry::optim::AdamWOptions{.lr = lr, .beta2 = 0.95, .weight_decay = 0.1}},
        {no_decay, ferry::optim::AdamWOptions{.lr = lr, .beta2 = 0.95, .weight_decay = 0}}});
    const bool amp = args.has("amp");
    const DType amp_dtype = home.type() == "cpu" ? DType::bf16 : DType::f16;
    ferry::GradScaler scaler({.enabled = amp && amp_dtype == DType::f16});

    std::vector<Device> others;
    if (!args.has("no-migrate"))
      for (const Device& d : sample::available_devices())
        if (d != home) others.push_back(d);
    std::int64_t n_params = 0;
    for (const Tensor& p : model.parameters()) n_params += p.numel();
    std::printf(
        "GPT: %lld layers, %lld heads, width %lld, context %lld, %.2fM parameters; "
        "%lld characters (vocabulary %zu), %lld steps of %lld sequences%s\n",
        (long long)config.n_layer, (long long)config.n_head, (long long)config.n_embd,
        (long long)config.block_size, double(n_params) / 1e6, (long long)all.size(0), chars.size(),
        (long long)steps, (long long)b, amp ? ", mixed precision" : "");

    auto evaluate = [&](const Tensor& split, const Device& dev) {
      ferry::NoGradGuard no_grad;
      model.eval();
      double total = 0;
      for (std::int64_t i = 0; i < eval_batches; ++i) {
        auto [x, y] = batch(split, b, config.block_size, dev);
        ferry::Autocast cast(dev.type(), amp_dtype, amp);
        total += sample::gpt_loss(model.forward(x), y).item<double>();
      }
      model.train();
      return total / double(eval_batches);
    };

    // The devices the steps run on: home, then from the middle step `away` steps on each
    // other device, then home again.
    auto device_at = [&](std::int64_t step) {
      const std::int64_t k = step < steps / 2 ? -1 : (step - steps / 2) / away;
      return k >= 0 && k < std::int64_t(others.size()) ? others[std::size_t(k)] : home;
    };
    std::vector<std::pair<std::int64_t, double>> curve;
    Device at = home;
    double val_loss = evaluate(val, at);
    curve.emplace_back(0, val_loss);
    std::printf("step %5d  val %.4f  on %s\n", 0, val_loss, at.str().c_str());
    sample::Progress bar("steps", std::size_t(eval_every));
    auto started = std::chrono::steady_clock::now();
    Tensor running = ferry::zeros({}, {.device = at});
    std::int64_t in_interval = 0;
    for (std::int64_t step = 0; step < steps; ++step) {
      const Device dev = device_at(step);
      if (dev != at) {
        const ferry::MigrationReport r = ferry::migrate(model, opt, dev);
        std::printf("moved the model and its AdamW state %s -> %s (%llu bytes)\n", at.str().c_str(),
                    dev.str().c_str(), (unsigned long long)r.bytes);
        at = dev;
        running = running.to(dev);
      }
      opt.set_lr(lr_at(step, warmup, steps, lr));
      auto [x, y] = batch(train, b, config.block_size, dev);
      opt.zero_grad();
      Tensor loss;
      {
        auto r = ferry::profiler::range("forward");  // names the step's phases in a trace
        ferry::Autocast cast(dev.type(), amp_dtype, amp);
        loss = sample::gpt_loss(model.forward(x), y);
      }
      {
        auto r = ferry::profiler::range("backward");
        scaler.scale(loss).backward();
      }
      {
        auto r = ferry::profiler::range("optimizer step");
        scaler.unscale_(opt);
        ferry::nn::utils::clip_grad_norm_(model.parameters(), 1.0);
        scaler.step(opt);
        scaler.update();
      }
      running = running + loss.detach();
      // An interval ends every eval_every steps, at the last step, and before a move, so that
      // each line of the log is one device's.
      const std::int64_t k = ++in_interval;
      if (k % 5 == 0) bar.step(std::size_t(k), running.item<double>() / double(k));
      if (k == eval_every || step + 1 == steps || device_at(step + 1) != dev) {
        const double train_loss = running.item<double>() / double(k);
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                .count() /
            double(k);
        bar.finish(train_loss);
        val_loss = evaluate(val, dev);
        curve.emplace_back(step + 1, val_loss);
        std::printf("step %5lld  train %.4f  val %.4f  lr %.2e  on %s  %.0f ms/step\n",
                    (long long)(step + 1), train_loss, val_loss, opt.lr(), dev.str().c_str(), ms);
        std::fflush(stdout);
        running = ferry::zeros({}, {.device = dev});
        in_interval = 0;
        started = std::chrono::steady_clock::now();
      }
    }
    print_curve(curve);
    profiling.finish();

    const std::string save = args.get("save", "gpt.safetensors");
    ferry::StateDict sd = model.state_dict();
    sd.metadata["gpt_config"] = json{
        {"vocab_size", config.vocab_size},
        {"block_size", config.block_size},
        {"n_layer", config.n_layer},
        {"n_head", config.n_head},
        {"n_embd", config.n_embd}}.dump();
    sd.metadata["vocab"] = json(chars).dump();
    ferry::save_safetensors(save, sd);
    std::printf("\nsaved %s; a sample (ferry-gpt --generate --load %s):\n\n", save.c_str(),
                save.c_str());
    std::printf("%s\n\n",
                generate(model, vocab, "\n", small ? 120 : 300, temperature, top_k, at).c_str());
    const double goal = real_option(args, "goal", small ? 2.6 : 1.75);
    std::printf("final validation loss on %s: %.4f (goal %.2f)\n", at.str().c_str(), val_loss,
                goal);
    return val_loss <= goal ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-gpt: %s\n", e.what());
    return 1;
  }
}
