variable "name" {
  description = "Prefix of every resource's name; also tags them (pedl:cluster)."
  type        = string
  default     = "pedl"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,20}$", var.name))
    error_message = "name must be 2-21 characters: lowercase letters, digits and '-', starting with a letter."
  }
}

variable "vpc_cidr" {
  description = "CIDR block of the cluster's VPC; split into two public and two private subnets."
  type        = string
  default     = "10.40.0.0/16"
  validation {
    condition     = can(cidrnetmask(var.vpc_cidr)) && tonumber(split("/", var.vpc_cidr)[1]) <= 22
    error_message = "vpc_cidr must be an IPv4 CIDR block of /22 or larger, e.g. 10.40.0.0/16."
  }
}

variable "allowed_cidrs" {
  description = "Who may reach the scheduler API (8080), the checkpoint store (8090) and metrics (9464)."
  type        = list(string)
  validation {
    condition     = length(var.allowed_cidrs) > 0 && alltrue([for c in var.allowed_cidrs : can(cidrnetmask(c))])
    error_message = "allowed_cidrs must hold at least one IPv4 CIDR block, e.g. [\"203.0.113.0/24\"]."
  }
}

variable "ssh_cidrs" {
  description = "Who may SSH to the instances (port 22); empty closes SSH (use SSM Session Manager)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.ssh_cidrs : can(cidrnetmask(c))])
    error_message = "ssh_cidrs must hold IPv4 CIDR blocks."
  }
}

variable "key_name" {
  description = "EC2 key pair for SSH; null for none."
  type        = string
  default     = null
}

variable "scheduler_ami_id" {
  description = "AMI of the scheduler + checkpoint store instance (Ubuntu 22.04/24.04 or Amazon Linux 2023)."
  type        = string
  validation {
    condition     = can(regex("^ami-[0-9a-f]{8,17}$", var.scheduler_ami_id))
    error_message = "scheduler_ami_id must be an AMI id such as ami-0123456789abcdef0."
  }
}

variable "agent_ami_id" {
  description = "AMI of the GPU agents: one with NVIDIA drivers (e.g. an AWS Deep Learning Base GPU AMI)."
  type        = string
  validation {
    condition     = can(regex("^ami-[0-9a-f]{8,17}$", var.agent_ami_id))
    error_message = "agent_ami_id must be an AMI id such as ami-0123456789abcdef0."
  }
}

variable "scheduler_instance_type" {
  description = "Instance type of the scheduler + checkpoint store."
  type        = string
  default     = "m6i.large"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", var.scheduler_instance_type))
    error_message = "scheduler_instance_type must be an EC2 instance type such as m6i.large."
  }
}

variable "agent_instance_types" {
  description = "GPU instance types for agents, in order of preference (the autoscaling group may mix them)."
  type        = list(string)
  default     = ["g5.xlarge"]
  validation {
    condition = length(var.agent_instance_types) > 0 && alltrue([
      for t in var.agent_instance_types : can(regex("^[a-z][a-z0-9-]*\\.[a-z0-9]+$", t))
    ])
    error_message = "agent_instance_types must hold at least one EC2 instance type such as g5.xlarge."
  }
}

variable "agent_min_count" {
  description = "Fewest agents the autoscaling group keeps."
  type        = number
  default     = 0
  validation {
    condition     = var.agent_min_count >= 0 && var.agent_min_count <= 100 && floor(var.agent_min_count) == var.agent_min_count
    error_message = "agent_min_count must be a whole number from 0 to 100."
  }
}

variable "agent_max_count" {
  description = "Most agents the autoscaling group may run."
  type        = number
  default     = 4
  validation {
    condition     = var.agent_max_count >= 1 && var.agent_max_count <= 100 && floor(var.agent_max_count) == var.agent_max_count
    error_message = "agent_max_count must be a whole number from 1 to 100."
  }
}

variable "agent_desired_count" {
  description = "Agents to start with (between agent_min_count and agent_max_count)."
  type        = number
  default     = 1
  validation {
    condition     = var.agent_desired_count >= 0 && var.agent_desired_count <= 100 && floor(var.agent_desired_count) == var.agent_desired_count
    error_message = "agent_desired_count must be a whole number from 0 to 100."
  }
}

variable "agent_cpu_slots" {
  description = "CPU slots each agent offers besides its GPUs (0: GPU slots only)."
  type        = number
  default     = 0
  validation {
    condition     = var.agent_cpu_slots >= 0 && var.agent_cpu_slots <= 64
    error_message = "agent_cpu_slots must be from 0 to 64."
  }
}

variable "agent_volume_gb" {
  description = "Root volume of each agent (the trials' working directories, datasets, PyTorch)."
  type        = number
  default     = 200
  validation {
    condition     = var.agent_volume_gb >= 30
    error_message = "agent_volume_gb must be at least 30 (a CUDA PyTorch install alone is several GB)."
  }
}

variable "db_instance_class" {
  description = "RDS instance class of the scheduler's PostgreSQL database."
  type        = string
  default     = "db.t4g.medium"
  validation {
    condition     = can(regex("^db\\.[a-z0-9]+\\.[a-z0-9]+$", var.db_instance_class))
    error_message = "db_instance_class must be an RDS class such as db.t4g.medium."
  }
}

variable "db_allocated_storage_gb" {
  description = "Storage of the RDS database."
  type        = number
  default     = 50
  validation {
    condition     = var.db_allocated_storage_gb >= 20 && var.db_allocated_storage_gb <= 65536
    error_message = "db_allocated_storage_gb must be from 20 to 65536."
  }
}

variable "db_password" {
  description = "Password of the database user `pedl`; kept in SSM Parameter Store, read by the scheduler at boot."
  type        = string
  sensitive   = true
  validation {
    condition     = length(var.db_password) >= 16 && can(regex("^[A-Za-z0-9_.~-]+$", var.db_password))
    error_message = "db_password must be at least 16 characters of letters, digits and _.~- (it goes into a URL)."
  }
}

variable "db_deletion_protection" {
  description = "Keep RDS from being deleted (turn off before `terraform destroy`)."
  type        = bool
  default     = true
}

variable "checkpoint_bucket_name" {
  description = "S3 bucket for checkpoints; null derives one from name and the account id."
  type        = string
  default     = null
  validation {
    condition     = var.checkpoint_bucket_name == null || can(regex("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", var.checkpoint_bucket_name))
    error_message = "checkpoint_bucket_name must be a valid S3 bucket name (3-63 lowercase letters, digits, '.', '-')."
  }
}

variable "checkpoint_bucket_force_destroy" {
  description = "Let `terraform destroy` delete a bucket that still holds checkpoints."
  type        = bool
  default     = false
}

variable "pedl_package" {
  description = "pip requirement that installs pedl with its services' dependencies on the instances, e.g. \"pedl[server]\" from an index or \"pedl[server] @ https://.../pedl-0.1.0-py3-none-any.whl\"."
  type        = string
  default     = "pedl[server]"
  validation {
    condition     = length(trimspace(var.pedl_package)) > 0
    error_message = "pedl_package must not be empty."
  }
}

variable "torch_index_url" {
  description = "Extra pip index the agents install PyTorch from (the CUDA build)."
  type        = string
  default     = "https://download.pytorch.org/whl/cu124"
}

variable "torch_requirement" {
  description = "pip requirement of PyTorch on the agents (pedl's tested version)."
  type        = string
  default     = "torch==2.13.0"
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}

variable "secrets_version" {
  description = "Bump to make a new cluster secret and admin password (instances read them at boot: replace them after)."
  type        = number
  default     = 1
}

variable "webui_cidrs" {
  description = "CIDR blocks that may reach the web UI on 8100 (plain HTTP: prefer an SSH tunnel or a TLS proxy; default none)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.webui_cidrs : can(cidrnetmask(c))])
    error_message = "webui_cidrs must hold IPv4 CIDR blocks like 203.0.113.0/24."
  }
}

variable "metrics_cidrs" {
  description = "CIDR blocks that may scrape Prometheus metrics on 9464 (plain HTTP; default none)."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for c in var.metrics_cidrs : can(cidrnetmask(c))])
    error_message = "metrics_cidrs must hold IPv4 CIDR blocks like 203.0.113.0/24."
  }
}
