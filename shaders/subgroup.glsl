// shaders/subgroup.glsl — how the LANES threads that share a row (reduce.comp, softmax.comp,
// layer_norm.comp, layer_norm_backward.comp) find each other, with and without subgroup
// operations.
//
// Note [Subgroup row reductions]
// The threads of a row combine their partial results (a sum, a (max, sum) pair, Welford's
// triple) pairwise. Through shared memory that is a tree of log2(LANES) levels, each behind a
// workgroup barrier. A subgroup (gl_SubgroupSize threads that run together: 32 on NVIDIA, 32
// or 64 on AMD, 8 to 32 on Intel, 4 to 16 on lavapipe by its vector width) can exchange
// registers without a barrier: subgroupShuffleXor(v, o) reads v from the thread whose index
// in the subgroup differs from ours by the bits of o. So the shaders, compiled once more with
// FERRY_SUBGROUP (the modules <name>_subgroup, shaders/shaders.cmake), first run a butterfly
// over the lanes that share their subgroup (offsets 1, 2, 4, ... threads, while below
// gl_SubgroupSize and LANES; every lane ends with their combined result),
// and the shared-memory tree only combines what is left across subgroups: none of it when a
// row fits in one subgroup. The merge functions are the ones the tree uses, so the results
// are as exact as before; only the pairing order differs.
//
// Which thread a shuffle reaches is defined by gl_SubgroupInvocationID, not by
// gl_LocalInvocationID: the spec does not say how a workgroup is cut into subgroups. So in a
// subgroup module a thread's index t (what the shaders derive their row and lane from) is
// gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID, which is a numbering of the
// workgroup's threads exactly when every subgroup is full (checked, uniformly, below; a
// device that fills them partly gets the plain tree and gl_LocalInvocationID). Lanes are
// numbered along t (lane = t % LANES), and WG, LANES and the subgroup size are powers of
// two, so t ^ h, h < LANES, is the same row's lane ^ h. Rows laid across the thread index
// (ROW_FAST: lane = t / rows per workgroup) take the tree alone: their lanes are at least 8
// threads apart, so on lavapipe (subgroups of 8) they never share a subgroup, and a butterfly
// over them could not be run here; they are always the shorter rows anyway.
//
// The modules need VK_SUBGROUP_FEATURE_BASIC and _SHUFFLE in compute shaders; the device
// takes them where it has both, unless FERRY_VULKAN_SUBGROUPS=0 (VulkanDevice, docs/vulkan.md).
#ifdef FERRY_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

// Whether a subgroup butterfly can run: a subgroup module on a device whose subgroups are all
// full. Uniform over the workgroup.
bool row_subgroups() {
#ifdef FERRY_SUBGROUP
  return gl_NumSubgroups * gl_SubgroupSize == gl_WorkGroupSize.x;
#else
  return false;
#endif
}

// The thread's index in the workgroup, numbered as the note says.
uint row_thread() {
#ifdef FERRY_SUBGROUP
  if (row_subgroups()) return gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
#endif
  return gl_LocalInvocationID.x;
}

// How many of a row's `lanes` lanes (consecutive threads) share a subgroup: the lanes the
// butterfly combines (1: none). The shared-memory tree takes the levels above.
uint row_subgroup_lanes(uint lanes) {
#ifdef FERRY_SUBGROUP
  if (row_subgroups()) return min(lanes, gl_SubgroupSize);
#endif
  return 1u;
}

// Shuffles in the subgroup modules, never reached in the others (row_subgroup_lanes is 1
// there): v of the thread whose subgroup index differs from ours by the bits of o, and v of
// the thread `back` places before us. A merge that is not symmetric (Chan's) leaves the
// butterfly's lanes with results a rounding apart; they take their first lane's.
#ifdef FERRY_SUBGROUP
#define ROW_SHUFFLE(v, o) subgroupShuffleXor(v, o)
#define ROW_SHUFFLE_BACK(v, back) subgroupShuffle(v, gl_SubgroupInvocationID - (back))
#else
#define ROW_SHUFFLE(v, o) (v)
#define ROW_SHUFFLE_BACK(v, back) (v)
#endif
