# Checkpoints in S3 (the checkpoint store reaches it with the scheduler instance's role) and the
# scheduler's PostgreSQL on RDS, its password in SSM Parameter Store rather than in user data.

data "aws_caller_identity" "current" {}

data "aws_region" "current" {}

locals {
  bucket_name = coalesce(var.checkpoint_bucket_name, "${var.name}-checkpoints-${data.aws_caller_identity.current.account_id}")
}

resource "aws_s3_bucket" "checkpoints" {
  bucket        = local.bucket_name
  force_destroy = var.checkpoint_bucket_force_destroy
  tags          = local.tags
}

resource "aws_s3_bucket_public_access_block" "checkpoints" {
  bucket                  = aws_s3_bucket.checkpoints.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "checkpoints" {
  bucket = aws_s3_bucket.checkpoints.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_db_subnet_group" "this" {
  name       = var.name
  subnet_ids = aws_subnet.private[*].id
  tags       = local.tags
}

resource "aws_db_instance" "this" {
  identifier                = var.name
  engine                    = "postgres"
  engine_version            = "15"
  instance_class            = var.db_instance_class
  allocated_storage         = var.db_allocated_storage_gb
  storage_type              = "gp3"
  storage_encrypted         = true
  db_name                   = "pedl"
  username                  = "pedl"
  password                  = var.db_password
  db_subnet_group_name      = aws_db_subnet_group.this.name
  vpc_security_group_ids    = [aws_security_group.db.id]
  publicly_accessible       = false
  backup_retention_period   = 7
  deletion_protection       = var.db_deletion_protection
  skip_final_snapshot       = !var.db_deletion_protection
  final_snapshot_identifier = var.db_deletion_protection ? "${var.name}-final" : null
  apply_immediately         = true
  tags                      = local.tags
}

resource "aws_ssm_parameter" "db_password" {
  name  = "/${var.name}/db-password"
  type  = "SecureString"
  value = var.db_password
  tags  = local.tags
}
