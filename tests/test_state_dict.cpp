// StateDict: unique names in insertion order, prefixes, all-or-nothing merge.
#include <gtest/gtest.h>

#include "ferry/ferry.hpp"

using ferry::StateDict;
using ferry::Tensor;

namespace {
Tensor scalar(float v) { return ferry::tensor(std::vector<float>{v}); }
}  // namespace

TEST(StateDict, InsertKeepsOrderAndRefusesDuplicates) {
  StateDict sd;
  EXPECT_TRUE(sd.empty());
  sd.insert("b", scalar(1));
  sd.insert("a", scalar(2));
  sd.insert("c.weight", scalar(3));
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"b", "a", "c.weight"}));
  EXPECT_THROW(sd.insert("a", scalar(9)), ferry::Error);
  EXPECT_EQ(sd.at("a").item<float>(), 2.0f);  // the failed insert changed nothing
  EXPECT_EQ(sd.size(), 3u);

  sd.insert_or_assign("b", scalar(7));  // replaced in place: order unchanged
  sd.insert_or_assign("d", scalar(8));
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"b", "a", "c.weight", "d"}));
  EXPECT_EQ(sd.at("b").item<float>(), 7.0f);

  EXPECT_TRUE(sd.erase("a"));
  EXPECT_FALSE(sd.erase("a"));
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"b", "c.weight", "d"}));
  EXPECT_EQ(sd.at("d").item<float>(), 8.0f);  // the index was rebuilt after the erase
  EXPECT_EQ(sd.find("a"), nullptr);
  ASSERT_NE(sd.find("c.weight"), nullptr);
  EXPECT_TRUE(sd.contains("c.weight"));
}

TEST(StateDict, AtNamesTheMissingKeyAndWhatIsThere) {
  StateDict sd;
  sd.insert("fc.weight", scalar(1));
  try {
    (void)sd.at("fc.bias");
    FAIL() << "at() of a missing key must throw";
  } catch (const ferry::Error& e) {
    EXPECT_NE(std::string(e.what()).find("fc.bias"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fc.weight"), std::string::npos) << e.what();
  }
}

TEST(StateDict, EntriesShareTensorsWithTheirSource) {
  Tensor t = ferry::zeros({3});
  StateDict sd;
  sd.insert("t", t);
  t.fill_(5);
  EXPECT_EQ(sd.at("t").to_vector<float>(), (std::vector<float>{5, 5, 5}));
  EXPECT_TRUE(sd.at("t").is_same(t));
}

TEST(StateDict, StripAndAddPrefix) {
  StateDict sd;
  sd.insert("model.fc.weight", scalar(1));
  sd.insert("optim.state.0", scalar(2));
  sd.insert("model.fc.bias", scalar(3));
  sd.metadata["model.version"] = "2";
  sd.metadata["optim.lr"] = "0.1";

  StateDict model = sd.strip_prefix("model.");
  EXPECT_EQ(model.keys(), (std::vector<std::string>{"fc.weight", "fc.bias"}));
  EXPECT_EQ(model.metadata, (std::map<std::string, std::string>{{"version", "2"}}));
  EXPECT_TRUE(model.at("fc.bias").is_same(sd.at("model.fc.bias")));
  EXPECT_TRUE(sd.strip_prefix("nothing.").empty());

  StateDict back = model.add_prefix("model.");
  EXPECT_EQ(back.keys(), (std::vector<std::string>{"model.fc.weight", "model.fc.bias"}));
  EXPECT_EQ(back.metadata, (std::map<std::string, std::string>{{"model.version", "2"}}));
  EXPECT_EQ(sd.strip_prefix("").keys(), sd.keys());
}

TEST(StateDict, MergeAddsEverythingOrNothing) {
  StateDict a;
  a.insert("x", scalar(1));
  a.metadata["k"] = "a";
  StateDict b;
  b.insert("y", scalar(2));
  b.metadata["j"] = "b";
  a.merge(b);
  EXPECT_EQ(a.keys(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(a.metadata.size(), 2u);

  // A clash anywhere leaves the target exactly as it was.
  StateDict clash;
  clash.insert("z", scalar(3));
  clash.insert("x", scalar(4));
  EXPECT_THROW(a.merge(clash), ferry::Error);
  EXPECT_EQ(a.keys(), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(a.at("x").item<float>(), 1.0f);

  StateDict meta_clash;
  meta_clash.insert("w", scalar(5));
  meta_clash.metadata["k"] = "other";
  EXPECT_THROW(a.merge(meta_clash), ferry::Error);
  EXPECT_FALSE(a.contains("w"));
  EXPECT_EQ(a.metadata.at("k"), "a");
}
