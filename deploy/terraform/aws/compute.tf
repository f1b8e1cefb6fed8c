locals {
  tags = merge(var.tags, { "pedl:cluster" = var.name })
}

resource "aws_instance" "scheduler" {
  ami                         = var.scheduler_ami_id
  instance_type               = var.scheduler_instance_type
  subnet_id                   = aws_subnet.public[0].id
  vpc_security_group_ids      = [aws_security_group.scheduler.id]
  iam_instance_profile        = aws_iam_instance_profile.scheduler.name
  key_name                    = var.key_name
  associate_public_ip_address = true
  user_data_replace_on_change = true
  user_data = templatefile("${path.module}/templates/scheduler.sh.tftpl", {
    pedl_package     = var.pedl_package
    region           = data.aws_region.current.name
    db_host          = aws_db_instance.this.address
    db_port          = aws_db_instance.this.port
    db_password_name = aws_ssm_parameter.db_password.name
    bucket           = aws_s3_bucket.checkpoints.bucket
    public_ip        = aws_eip.scheduler.public_ip
    secret_name      = aws_ssm_parameter.cluster_secret.name
    admin_name       = aws_ssm_parameter.admin_password.name
    tls_ca_name      = aws_ssm_parameter.tls_ca.name
  })
  metadata_options {
    http_tokens = "required" # IMDSv2 only
  }
  root_block_device {
    volume_size = 30
    volume_type = "gp3"
    encrypted   = true
  }
  tags = merge(local.tags, { Name = "${var.name}-scheduler" })
}

# Allocated before the instance so its address can go into the scheduler's TLS certificate.
resource "aws_eip" "scheduler" {
  domain = "vpc"
  tags   = merge(local.tags, { Name = "${var.name}-scheduler" })
}

resource "aws_eip_association" "scheduler" {
  allocation_id = aws_eip.scheduler.id
  instance_id   = aws_instance.scheduler.id
}

resource "aws_launch_template" "agent" {
  name_prefix            = "${var.name}-agent-"
  image_id               = var.agent_ami_id
  instance_type          = var.agent_instance_types[0]
  key_name               = var.key_name
  vpc_security_group_ids = [aws_security_group.agent.id]
  user_data = base64encode(templatefile("${path.module}/templates/agent.sh.tftpl", {
    pedl_package      = var.pedl_package
    torch_index_url   = var.torch_index_url
    torch_requirement = var.torch_requirement
    master            = "${aws_instance.scheduler.private_ip}:8080"
    cpu_slots         = var.agent_cpu_slots
    region            = data.aws_region.current.name
    secret_name       = aws_ssm_parameter.cluster_secret.name
    tls_ca_name       = aws_ssm_parameter.tls_ca.name
    tls_ca_pending    = local.tls_ca_pending
  }))
  iam_instance_profile {
    name = aws_iam_instance_profile.agent.name
  }
  metadata_options {
    http_tokens = "required"
  }
  block_device_mappings {
    device_name = "/dev/sda1"
    ebs {
      volume_size = var.agent_volume_gb
      volume_type = "gp3"
      encrypted   = true
    }
  }
  tag_specifications {
    resource_type = "instance"
    tags          = merge(local.tags, { Name = "${var.name}-agent" })
  }
  tags = local.tags
}

resource "aws_autoscaling_group" "agents" {
  name                = "${var.name}-agents"
  min_size            = var.agent_min_count
  max_size            = var.agent_max_count
  desired_capacity    = var.agent_desired_count
  vpc_zone_identifier = aws_subnet.public[*].id
  # Agents that are scaled in lose their trials, which the scheduler restarts from their last
  # checkpoint on other agents; give running steps a moment to finish.
  default_instance_warmup = 300
  # Agents register with the scheduler themselves; Terraform need not wait for GPU capacity
  # (which can take many minutes to be granted).
  wait_for_capacity_timeout = "0"

  mixed_instances_policy {
    launch_template {
      launch_template_specification {
        launch_template_id = aws_launch_template.agent.id
        version            = aws_launch_template.agent.latest_version
      }
      dynamic "override" {
        for_each = var.agent_instance_types
        content {
          instance_type = override.value
        }
      }
    }
    instances_distribution {
      on_demand_percentage_above_base_capacity = 100
    }
  }

  dynamic "tag" {
    for_each = local.tags
    content {
      key                 = tag.key
      value               = tag.value
      propagate_at_launch = true
    }
  }

  lifecycle {
    precondition {
      condition     = var.agent_min_count <= var.agent_desired_count && var.agent_desired_count <= var.agent_max_count
      error_message = "agent counts must satisfy agent_min_count <= agent_desired_count <= agent_max_count."
    }
  }
}
