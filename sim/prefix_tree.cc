#include "sim/prefix_tree.h"

#include <algorithm>
#include <cassert>
#include <iterator>

namespace servesim {

void hash_blocks(const BlockContent& content, int32_t block_size, int64_t first_block,
                 uint64_t prev, std::span<uint64_t> out) {
  const int64_t bs = block_size;
  int64_t pos = first_block * bs;
  int32_t s = 0;                            // the segment holding `pos`
  int64_t seg_start = content.first_token;  // its first token
  while (s < content.num_segments && seg_start + content.segments[s].tokens <= pos) {
    seg_start += content.segments[s].tokens;
    ++s;
  }
  for (uint64_t& hash : out) {
    const int64_t end = pos + bs;
    uint64_t h = prev;
    while (pos < end) {
      uint64_t id;
      int64_t offset, len;
      if (pos < content.prompt_tokens) {
        const Segment& seg = content.segments[s];
        id = seg.id;
        offset = pos - seg_start;
        len = std::min<int64_t>(seg_start + seg.tokens, end) - pos;
        if (pos + len == seg_start + seg.tokens) {
          seg_start += seg.tokens;
          ++s;
        }
      } else {
        id = content.output_id;
        offset = pos - content.prompt_tokens;
        len = end - pos;
      }
      h = content_id(content_id(h, id),
                     static_cast<uint64_t>(offset) << 32 | static_cast<uint64_t>(len));
      pos += len;
    }
    hash = h == 0 ? 1 : h;  // 0 would read as "no hash"
    prev = hash;
  }
}

void hash_sequence_blocks(Sequence& seq, int32_t block_size, size_t num_blocks) {
  const size_t from = seq.block_hashes.size();
  if (from >= num_blocks) return;
  const uint64_t prev = from == 0 ? kBlockHashSeed : seq.block_hashes.back();
  seq.block_hashes.resize(num_blocks);
  const BlockContent content{seq.prompt_segments, seq.num_prompt_segments, 0, seq.prompt_tokens,
                             seq.output_id};
  hash_blocks(content, block_size, static_cast<int64_t>(from), prev,
              std::span<uint64_t>(seq.block_hashes).subspan(from));
}

uint64_t PrefixTree::sequence_hash(Sequence& seq, int32_t pos) {
  hash_sequence_blocks(seq, block_size_, static_cast<size_t>(pos) + 1);
  return seq.block_hashes[static_cast<size_t>(pos)];
}

uint64_t PrefixTree::chunk_hash(Chunk& c, size_t slot) {
  const size_t known = c.hashes.size();
  if (slot < known) return c.hashes[slot];
  c.hashes.resize(slot + 1);
  const BlockContent content{c.segments.data(), static_cast<int32_t>(c.segments.size()),
                             c.first_token, c.prompt_tokens, c.output_id};
  hash_blocks(content, block_size_, c.first_block + static_cast<int64_t>(known),
              c.hashes[known - 1], std::span<uint64_t>(c.hashes).subspan(known));
  return c.hashes[slot];
}

PrefixTree::Node PrefixTree::child(Node parent, Sequence& seq, int32_t pos) {
  if (parent.chunk == kRootChunk) {
    const int32_t c = heads_.find(sequence_hash(seq, pos));
    return c == BlockHashIndex::kMissing ? Node{} : Node{c, 0};
  }
  Chunk& c = chunks_[static_cast<size_t>(parent.chunk)];
  const auto next = static_cast<size_t>(parent.slot) + 1;
  const bool follows = next < c.blocks.size();
  const int32_t branches =
      c.states.empty() ? 0 : c.states[static_cast<size_t>(parent.slot)].branches;
  if (!follows && branches == 0) return {};  // a leaf: nothing to compare
  // The sequence that registered the chunk goes on with its own content, the chunk's next.
  if (follows && c.owner == owner_of(seq)) return {parent.chunk, static_cast<int32_t>(next)};
  const uint64_t h = sequence_hash(seq, pos);
  if (follows && chunk_hash(c, next) == h) return {parent.chunk, static_cast<int32_t>(next)};
  if (branches > 0) {
    const int32_t head = heads_.find(h);
    if (head != BlockHashIndex::kMissing) {
      assert(chunks_[static_cast<size_t>(head)].parent == parent);
      return {head, 0};
    }
  }
  return {};
}

PrefixTree::SlotState& PrefixTree::state(Node n) {
  Chunk& c = chunk(n);
  if (c.states.empty()) c.states.resize(c.blocks.size());
  return c.states[static_cast<size_t>(n.slot)];
}

PrefixTree::Copy& PrefixTree::later_copy(Node n, int32_t block) {
  std::vector<Copy>& later = later_copies_.find(key(n))->second;
  return *std::find_if(later.begin(), later.end(), [&](const Copy& c) { return c.block == block; });
}

void PrefixTree::walk(Sequence& seq, int32_t max_blocks, std::vector<Node>& path) {
  constexpr int32_t kAhead = 32;  // hashes computed at once along a chunk
  auto pos = static_cast<int32_t>(path.size());
  Node node = path.empty() ? kRoot : path.back();
  while (pos < max_blocks) {
    node = child(node, seq, pos);
    if (!node.valid() || first_block(node) == kNone) return;
    path.push_back(node);
    ++pos;
    // On along the chunk while it holds seq's contents (its own: no comparison), compared hash
    // by hash: child() in a tight loop.
    Chunk& c = chunk(node);
    const bool own = c.owner == owner_of(seq);
    auto j = static_cast<size_t>(node.slot) + 1;
    for (; pos < max_blocks && j < c.blocks.size(); ++j, ++pos) {
      if (!own) {
        if (seq.block_hashes.size() <= static_cast<size_t>(pos)) {
          hash_sequence_blocks(seq, block_size_,
                               static_cast<size_t>(std::min(max_blocks, pos + kAhead)));
        }
        if (c.hashes.size() <= j) chunk_hash(c, std::min(c.blocks.size() - 1, j + kAhead));
        if (c.hashes[j] != seq.block_hashes[static_cast<size_t>(pos)]) break;
      }
      if (c.blocks[j] == kNone) return;  // held no more: a miss
      path.push_back({node.chunk, static_cast<int32_t>(j)});
    }
    node = path.back();
    if (pos < max_blocks && j < c.blocks.size() &&
        (c.states.empty() || c.states[j - 1].branches == 0)) {
      return;  // the chunk goes on with other contents, and nothing branches off here
    }
  }
}

void PrefixTree::add_copy(Node n, int32_t block) {
  ++version_;
  int32_t& first = chunk(n).blocks[static_cast<size_t>(n.slot)];
  if (first == kNone) {
    first = block;
    state(n).ref = 1;
    ++size_;
  } else {
    // vLLM's BlockPool._insert_block_hash: a further copy.
    later_copies_[key(n)].push_back({block, 1, kNone});
    ++state(n).more;
  }
}

PrefixTree::Node PrefixTree::extend(Node parent, Sequence& seq, int32_t pos,
                                    std::span<const int32_t> blocks) {
  ++version_;
  size_ += static_cast<int64_t>(blocks.size());
  if (parent.chunk != kRootChunk) {
    Chunk& c = chunk(parent);
    const auto end = static_cast<int32_t>(c.blocks.size());
    // Its own chunk, unless another sequence holds it (its hold was passed on, or the Sequence
    // object was reused after its first owner ended): appended, held. Otherwise a chunk of its own.
    if (parent.slot + 1 == end && c.owner == owner_of(seq) && (c.holder == nullptr || c.holder == &seq)) {
      if (c.holder == nullptr) {
        c.holder = &seq;
        c.hold_from = end;
      }
      c.blocks.insert(c.blocks.end(), blocks.begin(), blocks.end());
      if (!c.states.empty()) c.states.resize(c.blocks.size());
      return {parent.chunk, end};
    }
  }
  return new_chunk(parent, seq, pos, blocks);
}

PrefixTree::Node PrefixTree::new_chunk(Node parent, Sequence& seq, int32_t pos,
                                       std::span<const int32_t> blocks) {
  const uint64_t head_hash = sequence_hash(seq, pos);
  int32_t id;
  if (!free_chunks_.empty()) {
    id = free_chunks_.back();
    free_chunks_.pop_back();
  } else {
    id = static_cast<int32_t>(chunks_.size());
    chunks_.emplace_back();
  }
  Chunk& c = chunks_[static_cast<size_t>(id)];
  c.parent = parent;
  c.owner = owner_of(seq);
  c.holder = &seq;
  c.hold_from = 0;
  c.first_block = pos;
  c.blocks.assign(blocks.begin(), blocks.end());
  c.hashes.assign(1, head_hash);
  // The owner's content from slot 0's first token on, for the hashes computed later.
  const int64_t token = int64_t{pos} * block_size_;
  int32_t s = 0;
  int64_t seg_start = 0;
  while (s < seq.num_prompt_segments && seg_start + seq.prompt_segments[s].tokens <= token) {
    seg_start += seq.prompt_segments[s].tokens;
    ++s;
  }
  c.segments.assign(seq.prompt_segments + s, seq.prompt_segments + seq.num_prompt_segments);
  c.first_token = seg_start;
  c.prompt_tokens = seq.prompt_tokens;
  c.output_id = seq.output_id;
  [[maybe_unused]] const bool added = heads_.insert(head_hash, id);
  assert(added);  // else child(parent, seq, pos) would have found it
  if (parent.chunk != kRootChunk) ++state(parent).branches;
  return {id, 0};
}

PrefixTree::Hold PrefixTree::release_hold(Node n) {
  Chunk& c = chunk(n);
  assert(c.holder != nullptr && n.slot >= c.hold_from);
  const Hold h{c.holder, c.hold_from, static_cast<int32_t>(c.blocks.size())};
  c.holder = nullptr;
  return h;
}

void PrefixTree::pass_holds(std::span<const BlockRun> runs, [[maybe_unused]] const Sequence& from,
                            const Sequence& to) {
  for (const BlockRun& r : runs) {
    Chunk& c = chunks_[static_cast<size_t>(r.chunk)];
    if (r.hold) {
      assert(c.holder == &from);
      c.holder = &to;
    }
  }
}

void PrefixTree::evict_first(Node n) {
  ++version_;
  Chunk& c = chunk(n);
  SlotState* s = c.states.empty() ? nullptr : &c.states[static_cast<size_t>(n.slot)];
  if (s == nullptr || s->more == 0) {
    lose_last_copy(n);
    return;
  }
  // vLLM's BlockHashToBlockMap.pop(hash, block_id): the next copy becomes the first.
  const auto later = later_copies_.find(key(n));
  const Copy next = later->second.front();
  later->second.erase(later->second.begin());
  if (--s->more == 0) later_copies_.erase(later);
  c.blocks[static_cast<size_t>(n.slot)] = next.block;
  s->ref = next.ref;
  s->queued = next.queued;
  s->out = false;
}

void PrefixTree::evict_later(Node n, int32_t block) {
  ++version_;
  const auto later = later_copies_.find(key(n));
  std::vector<Copy>& copies = later->second;
  copies.erase(
      std::find_if(copies.begin(), copies.end(), [&](const Copy& c) { return c.block == block; }));
  if (--state(n).more == 0) later_copies_.erase(later);
}

void PrefixTree::lose_last_copy(Node n) {
  Chunk& c = chunk(n);
  c.blocks[static_cast<size_t>(n.slot)] = kNone;
  --size_;
  int32_t branches = 0;
  if (!c.states.empty()) {
    SlotState& s = c.states[static_cast<size_t>(n.slot)];
    s.ref = 0;
    s.queued = kNone;
    s.out = false;
    branches = s.branches;
  }
  if (static_cast<size_t>(n.slot) + 1 == c.blocks.size() && branches == 0) trim(n.chunk);
}

void PrefixTree::evict_run(int32_t id, int32_t from, int32_t to, std::vector<int32_t>& out) {
  ++version_;
  Chunk& c = chunks_[static_cast<size_t>(id)];
  assert(c.states.empty() && from <= to);
  const auto begin = c.blocks.begin() + from, end = c.blocks.begin() + to + 1;
  out.insert(out.end(), std::make_reverse_iterator(end), std::make_reverse_iterator(begin));
  size_ -= to - from + 1;
  if (static_cast<size_t>(to) + 1 == c.blocks.size()) {  // the chunk's end: popped
    c.blocks.resize(static_cast<size_t>(from));
    trim(id);
  } else {
    std::fill(c.blocks.begin() + from, c.blocks.begin() + to + 1, kNone);
  }
}

void PrefixTree::trim(int32_t id) {
  while (true) {
    Chunk& c = chunks_[static_cast<size_t>(id)];
    while (!c.blocks.empty() && c.blocks.back() == kNone &&
           (c.states.empty() || c.states.back().branches == 0)) {
      c.blocks.pop_back();
      if (!c.states.empty()) c.states.pop_back();
    }
    if (!c.blocks.empty()) return;
    // Empty: out of the index and out of its parent.
    const Node parent = c.parent;
    heads_.erase(c.hashes[0]);
    c = Chunk{};
    free_chunks_.push_back(id);
    if (parent.chunk == kRootChunk) return;
    Chunk& p = chunk(parent);
    SlotState& ps = p.states[static_cast<size_t>(parent.slot)];
    --ps.branches;
    if (static_cast<size_t>(parent.slot) + 1 != p.blocks.size() ||
        p.blocks[static_cast<size_t>(parent.slot)] != kNone || ps.branches != 0) {
      return;
    }
    id = parent.chunk;
  }
}

}  // namespace servesim
