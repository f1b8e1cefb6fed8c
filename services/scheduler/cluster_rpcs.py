"""The scheduler's RPCs about the cluster rather than an experiment: its agents and slots, its
address book and its settings. A part of `SchedulerApi` (api.py), which holds what they read."""

from __future__ import annotations

import json
from typing import Any

import grpc
import grpc.aio

from pedl import __version__
from pedl.v1 import scheduler_pb2
from pedl_scheduler.cluster import Cluster
from pedl_scheduler.experiments import ExperimentManager
from pedl_scheduler.storage.ops import agents as agent_ops
from pedl_server_auth import current_principal


class ClusterRpcs:
    manager: ExperimentManager
    cluster: Cluster
    cluster_id: str
    db: Any
    master_config: dict[str, Any]

    async def ListAgents(  # noqa: N802
        self, request: scheduler_pb2.ListAgentsRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.ListAgentsResponse:
        return scheduler_pb2.ListAgentsResponse(
            agents=[a.to_proto() for a in self.cluster.agents.values()],
            pilot_jobs=self.cluster.pilot_jobs,
            gc_tasks=[t.to_proto() for t in self.manager.deleter.tasks.listing()],
        )

    async def SetAgentEnabled(  # noqa: N802
        self, request: scheduler_pb2.SetAgentEnabledRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.SetAgentEnabledResponse:
        if not current_principal().admin:  # authz.RULES says so; kept for --no-auth's test servers
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "only an admin can enable or disable agents"
            )
        try:
            agent, slot_id = self.cluster.set_enabled(request.agent_id, request.slot_id, request.enabled)
        except KeyError as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, str(e.args[0]))
        agent_ops.set_disabled(self.db, agent.id, slot_id, not request.enabled)  # survives a restart
        if request.enabled:
            self.manager.wake.set()  # queued trials may fit now
        return scheduler_pb2.SetAgentEnabledResponse(agent=agent.to_proto())

    async def GetClusterInfo(  # noqa: N802
        self, request: scheduler_pb2.GetClusterInfoRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.GetClusterInfoResponse:
        return scheduler_pb2.GetClusterInfoResponse(
            version=__version__,
            checkpoint_store_address=self.manager.checkpoint_store_address,
            cluster_id=self.cluster_id,
        )

    async def GetMasterConfig(  # noqa: N802
        self, request: scheduler_pb2.GetMasterConfigRequest, context: grpc.aio.ServicerContext
    ) -> scheduler_pb2.GetMasterConfigResponse:
        return scheduler_pb2.GetMasterConfigResponse(config_json=json.dumps(self.master_config))
