"""The scheduler's authentication and TLS settings, kept out of main.py: flags and wiring."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import grpc.aio

from pedl import auth
from pedl.v1 import auth_pb2, auth_pb2_grpc
from pedl_scheduler.auth_service import LOGIN, AuthServicer, SchedulerAuthenticator
from pedl_scheduler.login_guard import AttemptLimits, HashPool, Limits
from pedl_scheduler.storage import Storage
from pedl_scheduler.store_questions import StoreQuestions
from pedl_scheduler.users import AccountError, Users
from pedl_server_auth import AuthInterceptor, trial_token

BOOTSTRAP_ADMIN = "admin"


def add_arguments(p: argparse.ArgumentParser) -> None:
    env = os.environ.get
    p.add_argument(
        "--cluster-secret-file",
        default=env("PEDL_SCHEDULER_CLUSTER_SECRET_FILE", ""),
        help="file holding the secret agents and the checkpoint store present (or env PEDL_CLUSTER_SECRET)",
    )
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="development only: accept every call without a credential",
    )
    p.add_argument(
        "--admin-password-file",
        default=env("PEDL_SCHEDULER_ADMIN_PASSWORD_FILE", ""),
        help=f"creates the user {BOOTSTRAP_ADMIN!r} (admin) with this password unless it exists",
    )
    p.add_argument(
        "--session-ttl-hours",
        type=float,
        default=float(env("PEDL_SCHEDULER_SESSION_TTL_HOURS", "168")),
        help="how long a login stays valid (default 168 = a week)",
    )
    p.add_argument(
        "--private-experiments",
        action="store_true",
        default=env("PEDL_SCHEDULER_PRIVATE_EXPERIMENTS", "") not in ("", "0", "false"),
        help="users who are not admins see only their own experiments, trials, logs and checkpoints "
        "(default: every user reads everything, as in Determined)",
    )
    p.add_argument(
        "--trial-token-ttl-hours",
        type=float,
        default=float(
            env("PEDL_SCHEDULER_TRIAL_TOKEN_TTL_HOURS", str(trial_token.DEFAULT_TTL_SECONDS / 3600))
        ),
        help="lifetime of a trial run's checkpoint-store token (it also stops when its run ends)",
    )
    p.add_argument(
        "--login-workers",
        type=int,
        default=int(env("PEDL_SCHEDULER_LOGIN_WORKERS", "0")),
        help="threads that hash passwords, off the event loop (default: one per four cores, at least 1)",
    )
    p.add_argument(
        "--login-free-failures",
        default=env("PEDL_SCHEDULER_LOGIN_FREE_FAILURES", "5,20"),
        metavar="PER_USER,PER_CLIENT",
        help="failed logins before each further try must wait (2 s, doubling to 5 min): per username, "
        "per client (its address and the identity it sends; default 5,20)",
    )
    p.add_argument("--tls-cert", default=env("PEDL_SCHEDULER_TLS_CERT", ""), help="serve TLS: cert PEM")
    p.add_argument("--tls-key", default=env("PEDL_SCHEDULER_TLS_KEY", ""), help="serve TLS: key PEM")
    p.add_argument("--tls-ca", default="", help="CA to verify the checkpoint store with (or env PEDL_TLS_CA)")


@dataclass
class Security:
    secret: str | None
    users: Users
    tls: tuple[bytes, bytes] | None
    private_experiments: bool = False
    trial_token_ttl_seconds: float = trial_token.DEFAULT_TTL_SECONDS
    interceptors: list[grpc.aio.ServerInterceptor] = field(default_factory=list)
    register: list[Callable[[grpc.aio.Server], None]] = field(default_factory=list)
    service_names: list[str] = field(default_factory=list)


def server_tls(cert: str, key: str) -> tuple[bytes, bytes] | None:
    if bool(cert) != bool(key):
        raise auth.AuthConfigError("--tls-cert and --tls-key go together")
    if not cert:
        return None
    return auth.read_pem(cert, "TLS certificate"), auth.read_pem(key, "TLS private key")


def free_failures(text: str) -> Limits:
    try:
        per_user, per_client = (int(x) for x in text.split(","))
    except ValueError:
        per_user = per_client = 0
    if per_user < 1 or per_client < 1:
        raise auth.AuthConfigError(f"--login-free-failures must be two counts >= 1 like 5,20, got {text!r}")
    return Limits(free_per_user=per_user, free_per_client=per_client)


def setup(args: argparse.Namespace, db: Storage) -> Security:
    """Reads secrets and certificates (raising AuthConfigError on bad ones) and builds the pieces."""
    secret = auth.cluster_secret(args.cluster_secret_file)
    if not args.no_auth and secret is None:
        raise auth.AuthConfigError(
            "authentication is on, but no cluster secret is configured: pass --cluster-secret-file FILE "
            "or set PEDL_CLUSTER_SECRET (or run with --no-auth for development)"
        )
    if not 0 < args.session_ttl_hours:
        raise auth.AuthConfigError(f"--session-ttl-hours must be > 0, got {args.session_ttl_hours}")
    if not 0 < args.trial_token_ttl_hours:
        raise auth.AuthConfigError(f"--trial-token-ttl-hours must be > 0, got {args.trial_token_ttl_hours}")
    if args.private_experiments and args.no_auth:
        raise auth.AuthConfigError("--private-experiments needs users: it cannot go with --no-auth")
    if args.login_workers < 0:
        raise auth.AuthConfigError(f"--login-workers must be >= 0, got {args.login_workers}")
    auth.configure_process(credential=secret, tls_ca=args.tls_ca or None)
    users = Users(db, args.session_ttl_hours * 3600)
    if args.admin_password_file:
        password = auth.read_secret_file(args.admin_password_file, "admin password")
        try:
            users.ensure_admin(BOOTSTRAP_ADMIN, password)
        except AccountError as e:
            raise auth.AuthConfigError(f"--admin-password-file: {e}") from e
    sec = Security(
        secret,
        users,
        server_tls(args.tls_cert, args.tls_key),
        private_experiments=args.private_experiments,
        trial_token_ttl_seconds=args.trial_token_ttl_hours * 3600,
    )
    questions = StoreQuestions(db, users, secret, sec.private_experiments) if secret else None
    limits = AttemptLimits(free_failures(args.login_free_failures))
    servicer = AuthServicer(users, not args.no_auth, questions, HashPool(args.login_workers or None), limits)
    sec.register.append(lambda s: auth_pb2_grpc.add_AuthServiceServicer_to_server(servicer, s))
    sec.service_names.append(auth_pb2.DESCRIPTOR.services_by_name["AuthService"].full_name)
    if not args.no_auth:
        assert secret is not None
        sec.interceptors.append(AuthInterceptor(SchedulerAuthenticator(users, secret), open_methods=[LOGIN]))
    return sec
