#pragma once

// gradd's one CAF type-ID block. CAF 0.17 writes each registered name on the
// wire, so renaming a type here changes the daemon protocol.

#include "actors/daemon_protocol.hpp"
#include "actors/messages.hpp"

#include <caf/type_id.hpp>

CAF_BEGIN_TYPE_ID_BLOCK(gradd, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::capture_job))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::pass_job))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::compile_job))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::compile_result))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::settled_request))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::compile_counts))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::client_hello))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::daemon_welcome))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::compile_request))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::compiled_plan))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::agree_request))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::agreed))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::client_report))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::compile_event))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::subscribe))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::status_request))
  CAF_ADD_TYPE_ID(gradd, (gradd::actors::daemon_status))
CAF_END_TYPE_ID_BLOCK(gradd)
