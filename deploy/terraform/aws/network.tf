# Two public subnets (scheduler, agents: they fetch packages without a NAT gateway) and two
# private ones (RDS, which wants subnets in two availability zones).

data "aws_availability_zones" "available" {
  state = "available"
}

locals {
  azs = slice(data.aws_availability_zones.available.names, 0, 2)
}

resource "aws_vpc" "this" {
  cidr_block           = var.vpc_cidr
  enable_dns_support   = true
  enable_dns_hostnames = true
  tags                 = merge(local.tags, { Name = var.name })
}

resource "aws_internet_gateway" "this" {
  vpc_id = aws_vpc.this.id
  tags   = merge(local.tags, { Name = var.name })
}

resource "aws_subnet" "public" {
  count                   = 2
  vpc_id                  = aws_vpc.this.id
  availability_zone       = local.azs[count.index]
  cidr_block              = cidrsubnet(var.vpc_cidr, 4, count.index)
  map_public_ip_on_launch = true
  tags                    = merge(local.tags, { Name = "${var.name}-public-${count.index}" })
}

resource "aws_subnet" "private" {
  count             = 2
  vpc_id            = aws_vpc.this.id
  availability_zone = local.azs[count.index]
  cidr_block        = cidrsubnet(var.vpc_cidr, 4, count.index + 2)
  tags              = merge(local.tags, { Name = "${var.name}-private-${count.index}" })
}

resource "aws_route_table" "public" {
  vpc_id = aws_vpc.this.id
  route {
    cidr_block = "0.0.0.0/0"
    gateway_id = aws_internet_gateway.this.id
  }
  tags = merge(local.tags, { Name = "${var.name}-public" })
}

resource "aws_route_table_association" "public" {
  count          = 2
  subnet_id      = aws_subnet.public[count.index].id
  route_table_id = aws_route_table.public.id
}

# ---- security groups: users -> scheduler/store; agents -> scheduler/store; scheduler -> RDS ----

resource "aws_security_group" "scheduler" {
  name        = "${var.name}-scheduler"
  description = "pedl scheduler and checkpoint store"
  vpc_id      = aws_vpc.this.id
  tags        = local.tags
}

resource "aws_security_group" "agent" {
  name        = "${var.name}-agent"
  description = "pedl GPU agents"
  vpc_id      = aws_vpc.this.id
  tags        = local.tags
}

resource "aws_security_group" "db" {
  name        = "${var.name}-db"
  description = "pedl scheduler database"
  vpc_id      = aws_vpc.this.id
  tags        = local.tags
}

locals {
  # What users reach on the scheduler instance: gRPC over TLS only. The web UI and the metrics
  # endpoint speak plain HTTP and open only to the CIDRs given for them (none by default).
  user_rules = merge(
    { for c in var.allowed_cidrs : "8080 ${c}" => { port = 8080, cidr = c, what = "scheduler API (TLS)" } },
    { for c in var.allowed_cidrs : "8090 ${c}" => { port = 8090, cidr = c, what = "checkpoint store (TLS)" } },
    { for c in var.webui_cidrs : "8100 ${c}" => { port = 8100, cidr = c, what = "web UI (HTTP)" } },
    { for c in var.metrics_cidrs : "9464 ${c}" => { port = 9464, cidr = c, what = "Prometheus metrics (HTTP)" } },
  )
}

resource "aws_security_group_rule" "scheduler_from_users" {
  for_each          = local.user_rules
  type              = "ingress"
  security_group_id = aws_security_group.scheduler.id
  protocol          = "tcp"
  from_port         = each.value.port
  to_port           = each.value.port
  cidr_blocks       = [each.value.cidr]
  description       = each.value.what
}

# The ranks of a trial spanning agents connect to each other: the rendezvous on the chief agent's
# 29500 + trial id mod 1000, then a port per rank that the kernel picks.
resource "aws_security_group_rule" "agent_from_agents" {
  type                     = "ingress"
  security_group_id        = aws_security_group.agent.id
  protocol                 = "tcp"
  from_port                = 0
  to_port                  = 65535
  source_security_group_id = aws_security_group.agent.id
  description              = "ranks of one trial across agents"
}

resource "aws_security_group_rule" "scheduler_from_agents" {
  for_each                 = { 8080 = "agent link", 8090 = "checkpoint uploads" }
  type                     = "ingress"
  security_group_id        = aws_security_group.scheduler.id
  protocol                 = "tcp"
  from_port                = tonumber(each.key)
  to_port                  = tonumber(each.key)
  source_security_group_id = aws_security_group.agent.id
  description              = each.value
}

resource "aws_security_group_rule" "db_from_scheduler" {
  type                     = "ingress"
  security_group_id        = aws_security_group.db.id
  protocol                 = "tcp"
  from_port                = 5432
  to_port                  = 5432
  source_security_group_id = aws_security_group.scheduler.id
  description              = "PostgreSQL from the scheduler"
}

resource "aws_security_group_rule" "ssh" {
  for_each          = length(var.ssh_cidrs) > 0 ? { scheduler = aws_security_group.scheduler.id, agent = aws_security_group.agent.id } : {}
  type              = "ingress"
  security_group_id = each.value
  protocol          = "tcp"
  from_port         = 22
  to_port           = 22
  cidr_blocks       = var.ssh_cidrs
  description       = "SSH"
}

resource "aws_security_group_rule" "egress" {
  for_each          = { scheduler = aws_security_group.scheduler.id, agent = aws_security_group.agent.id }
  type              = "egress"
  security_group_id = each.value
  protocol          = "-1"
  from_port         = 0
  to_port           = 0
  cidr_blocks       = ["0.0.0.0/0"]
  description       = "packages, S3, RDS, the scheduler"
}
