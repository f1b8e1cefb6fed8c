# The cluster's secrets, made by Terraform and kept in SSM Parameter Store (SecureString): the
# cluster secret (scheduler, store and agents) and the first admin's password. Both are ephemeral
# random values written with write-only arguments, so neither lands in the plan, the state or user
# data; each instance reads its own through its IAM role at boot. Read the admin password with
#   aws ssm get-parameter --with-decryption --name "$(terraform output -raw admin_password_parameter)"
# (The hashicorp/random provider's random_password would keep the value in state; this needs only
# the AWS provider and Terraform >= 1.11.)

ephemeral "aws_secretsmanager_random_password" "cluster_secret" {
  password_length     = 48
  exclude_punctuation = true
}

ephemeral "aws_secretsmanager_random_password" "admin_password" {
  password_length     = 24
  exclude_punctuation = true
}

resource "aws_ssm_parameter" "cluster_secret" {
  name             = "/${var.name}/cluster-secret"
  type             = "SecureString"
  value_wo         = ephemeral.aws_secretsmanager_random_password.cluster_secret.random_password
  value_wo_version = var.secrets_version
  tags             = local.tags
}

resource "aws_ssm_parameter" "admin_password" {
  name             = "/${var.name}/admin-password"
  type             = "SecureString"
  value_wo         = ephemeral.aws_secretsmanager_random_password.admin_password.random_password
  value_wo_version = var.secrets_version
  tags             = local.tags
}

# The cluster's CA certificate (public). The scheduler makes the CA and its certificate at first boot
# (`pedl-scheduler init --tls-host ...`, the keys never leave it) and writes the CA here; agents wait
# for it and verify the scheduler and the store with it. Users fetch it the same way for PEDL_TLS_CA.
resource "aws_ssm_parameter" "tls_ca" {
  name  = "/${var.name}/tls-ca"
  type  = "String"
  value = local.tls_ca_pending
  tags  = local.tags
  lifecycle {
    ignore_changes = [value]
  }
}

locals {
  tls_ca_pending = "pending: the scheduler writes its CA certificate here at first boot"
}
