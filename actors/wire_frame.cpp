// The daemon's frames (see wire_frame.hpp). Payloads are read with CAF's
// binary deserializer, which reads a sequence element by element and a
// string only as far as the bytes go, so a forged length inside a payload
// cannot make it allocate past the frame.

#include "actors/wire_frame.hpp"

#include "actors/digest.hpp"
#include "actors/ir_inspect.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

namespace gradd::actors {

namespace {

uint64_t little_endian(const char* bytes, size_t n) {
  uint64_t value = 0;
  for (size_t i = 0; i < n; ++i)
    value |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * i);
  return value;
}

void put_little_endian(std::vector<char>& out, uint64_t value, size_t n) {
  for (size_t i = 0; i < n; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

std::string mac(const std::string& token, std::string_view label, std::string_view first,
                std::string_view second) {
  std::string message(label);
  message.append(first).append(second);
  auto sum = hmac_sha256(token, message);
  return std::string(as_bytes(sum));
}

} // namespace

std::optional<frame_header> read_header(const char* bytes) {
  auto kind = static_cast<uint8_t>(bytes[4]);
  if (kind < static_cast<uint8_t>(frame_kind::challenge)
      || kind > static_cast<uint8_t>(frame_kind::refusal))
    return std::nullopt;
  return frame_header{static_cast<uint32_t>(little_endian(bytes, 4)),
                      static_cast<frame_kind>(kind), little_endian(bytes + 5, 8)};
}

frame_reader::step frame_reader::take(const std::vector<char>& bytes) {
  if (reading_) {
    auto header = *reading_;
    reading_.reset();
    return {step::frame, header, std::string_view(bytes.data(), bytes.size())};
  }
  auto header = bytes.size() == frame_header_bytes ? read_header(bytes.data()) : std::nullopt;
  if (!header)
    return {step::malformed, {}, {}};
  if (header->size > limit_)
    return {step::too_large, *header, {}};
  if (header->size == 0)
    return {step::frame, *header, {}};
  reading_ = header;
  return {step::read_more, *header, {}};
}

std::vector<char> frame(frame_kind kind, uint64_t id, std::string_view payload) {
  std::vector<char> out;
  out.reserve(frame_header_bytes + payload.size());
  put_little_endian(out, payload.size(), 4);
  out.push_back(static_cast<char>(kind));
  put_little_endian(out, id, 8);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

template <class T>
std::string payload_of(T x) {
  std::vector<char> bytes;
  caf::binary_serializer sink{nullptr, bytes};
  if (auto error = sink(x))
    throw std::runtime_error("gradd: a message of the daemon protocol does not serialize");
  return std::string(bytes.begin(), bytes.end());
}

template <class T>
bool read_payload(std::string_view payload, T& x) {
  try {
    caf::binary_deserializer source{nullptr, payload.data(), payload.size()};
    return !source(x) && source.remaining() == 0;
  } catch (const std::exception&) {
    return false;
  }
}

#define GRADD_WIRE_MESSAGE(T)                   \
  template std::string payload_of<T>(T);        \
  template bool read_payload<T>(std::string_view, T&);

GRADD_WIRE_MESSAGE(client_hello)
GRADD_WIRE_MESSAGE(daemon_welcome)
GRADD_WIRE_MESSAGE(compile_request)
GRADD_WIRE_MESSAGE(compiled_plan)
GRADD_WIRE_MESSAGE(agree_request)
GRADD_WIRE_MESSAGE(agreed)
GRADD_WIRE_MESSAGE(client_report)
GRADD_WIRE_MESSAGE(status_request)
GRADD_WIRE_MESSAGE(daemon_status)
GRADD_WIRE_MESSAGE(wire_challenge)
GRADD_WIRE_MESSAGE(wire_proof)
GRADD_WIRE_MESSAGE(wire_refusal)

#undef GRADD_WIRE_MESSAGE

std::string client_mac(const std::string& token, std::string_view daemon_nonce,
                       std::string_view client_nonce) {
  return mac(token, "gradd client proof\n", daemon_nonce, client_nonce);
}

std::string daemon_mac(const std::string& token, std::string_view daemon_nonce,
                       std::string_view client_nonce) {
  return mac(token, "gradd daemon proof\n", client_nonce, daemon_nonce);
}

} // namespace gradd::actors
